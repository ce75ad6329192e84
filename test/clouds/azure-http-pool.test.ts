// The HTTP client of discovery's ARM clients: requests share one keep-alive pool per endpoint,
// capped, so a burst of calls waits for sockets instead of opening a TLS connection each.
import https from 'node:https';
import type {AddressInfo} from 'node:net';
import {createPipelineRequest} from '@azure/core-rest-pipeline';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {pooledHttpClient} from '../../src/clouds/azure/http-client.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';

let server: https.Server;
let url: string;
let ca: string;
let connections = 0;
let inFlight = 0;
let maxInFlight = 0;

beforeAll(async () => {
  const tls = await sharedServerTls();
  ca = tls.caPem;
  server = https.createServer({cert: tls.certPem, key: tls.keyPem}, (_req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    // Answered on the next turns of the loop, so the burst really overlaps.
    setImmediate(() => setImmediate(() => {
      inFlight--;
      res.writeHead(200, {'content-type': 'application/json'});
      res.end('{"value":[]}');
    }));
  });
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('pooledHttpClient', () => {
  it('sends a burst over at most its cap of connections, reusing them, with the TLS settings the request carries', async () => {
    const client = pooledHttpClient(3);
    const tlsSettings = {ca};
    // The SDK's tlsPolicy puts the client's tlsOptions on every request, as one object.
    const send = () => client.sendRequest(Object.assign(createPipelineRequest({url: `${url}/subscriptions?api-version=x`}), {tlsSettings}));
    const first = await Promise.all(Array.from({length: 24}, send));
    expect(first.map((r) => r.status)).toEqual(Array.from({length: 24}, () => 200));
    expect(maxInFlight).toBeLessThanOrEqual(3);
    expect(connections).toBeLessThanOrEqual(3);

    // Kept alive: a second burst opens nothing new.
    const before = connections;
    await Promise.all(Array.from({length: 12}, send));
    expect(connections).toBe(before);
  });

  it('leaves a request that asks for no keep-alive to the SDK', async () => {
    const client = pooledHttpClient(3);
    const request = Object.assign(createPipelineRequest({url: `${url}/x`, disableKeepAlive: true}), {tlsSettings: {ca}});
    const response = await client.sendRequest(request);
    expect(response.status).toBe(200);
    expect(request.agent).toBeUndefined();
  });
});
