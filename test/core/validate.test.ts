/** The cluster-CA check the EKS and AKS paths share: base64 of text holding a PEM certificate. */
import {describe, expect, it} from 'vitest';
import {isBase64Pem} from '../../src/core/validate.ts';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n';
const b64 = (bytes: Buffer | string): string => Buffer.from(bytes).toString('base64');

describe('isBase64Pem', () => {
  it.each([
    ['a PEM certificate', b64(PEM), true],
    ['a bundle with a comment before the certificate', b64(`# cluster CA\n${PEM}`), true],
    ['a certificate after bytes that are not UTF-8', b64(Buffer.concat([Buffer.from([0xe2, 0xff, 0xc3]), Buffer.from(PEM)])), true],
    ['a marker split by a byte that is not UTF-8', b64(Buffer.concat([Buffer.from('-----BEGIN CERT'), Buffer.from([0xe2]), Buffer.from('IFICATE-----')])), false],
    ['base64 wrapped over lines', b64(PEM).replace(/(.{64})/g, '$1\n'), true],
    ['base64 of other text', b64('not a cert'), false],
    ['a private key', b64('-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'), false],
    ['the PEM itself, not base64', PEM, false],
    ['an empty string', '', false],
  ])('%s: %s', (_label, value, expected) => {
    expect(isBase64Pem(value)).toBe(expected);
  });
});
