/**
 * Usage texts of the commands that do not print their own: `main` answers `--help` / `-h`
 * with them (exit 0) before the command parses its flags.
 */

const START = `usage: kube-discovery start -c FILE [--deregister-on-exit]
Runs the discovery service: a cycle at start and on schedule, heartbeats, the HTTP API.
  -c, --config FILE       the config file (see discovery.example.yaml)
  --deregister-on-exit    delete this replica's entries on a clean stop (default: leave them to expire)
  -h, --help              this help
Signals: SIGTERM/SIGINT stop cleanly, SIGHUP runs a cycle now.
Exit codes: 0 clean stop, 1 fatal error, 2 bad usage or config.
`;

const ONCE = `usage: kube-discovery once -c FILE [--output json|table] [--explain]
Runs one discovery cycle against the configured registry and prints what it did and why.
  -c, --config FILE       the config file
  -o, --output FORMAT     json or table (default: table on a terminal, json otherwise)
  --explain               add the tag matcher's reasons
  -h, --help              this help
Exit codes: 0 every source succeeded, 1 some failed, 2 bad usage or config.
`;

const LS = `usage: kube-discovery ls [--server URL] [-l SELECTOR] [-o table|wide|name|json|yaml] [--show-labels] [--token-file FILE]
Lists the discovered clusters from the service's HTTP API, like \`kubectl get\`.
  --server URL            the service (default KUBE_DISCOVERY_SERVER, else http://127.0.0.1:3000)
  -l, --selector k=v,...  only clusters with all of these labels (also --labels)
  -o, --output FORMAT     table (default on a terminal), wide (adds labels), name, json (default otherwise), yaml
  --show-labels           add the labels column to the table
  --token-file FILE       bearer token for the API (else KUBE_DISCOVERY_TOKEN)
  -h, --help              this help
Exit codes: 0, 1 the API cannot be read, 2 bad usage.
`;

const CONFIG = `usage: kube-discovery config check -c FILE
Validates a config and prints the effective config (defaults filled, durations formatted).
  -c, --config FILE       the config file
  -h, --help              this help
Exit codes: 0 valid, 2 invalid (every problem on stderr, with line and column).
`;

const VERSION = `usage: kube-discovery version
Prints the version (also: kube-discovery --version).
`;

const USAGES: Readonly<Record<string, string>> = {start: START, once: ONCE, ls: LS, config: CONFIG, version: VERSION};

/** Whether argv asks for help (`-h`, `--help`, or `help` as the only word). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('-h') || argv.includes('--help') || (argv.length === 1 && argv[0] === 'help');
}

/** The usage of `command` when main prints it; undefined when the command prints its own. */
export function commandUsage(command: string): string | undefined {
  return Object.hasOwn(USAGES, command) ? USAGES[command] : undefined;
}
