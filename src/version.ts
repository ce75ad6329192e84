/** The service's version, read once from package.json. */
import {readFileSync} from 'node:fs';

/** Version of kube-discovery (package.json `version`). */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {version: string}).version;
