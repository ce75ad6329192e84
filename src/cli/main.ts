#!/usr/bin/env node
/** The `kube-discovery` command line: dispatches to one sub-command and exits with its code. */
import {registerSecretsFromEnv} from '../observability/redact.ts';
import {processIo, type CliIo, type Command} from './io.ts';
import {commandUsage, wantsHelp} from './usage.ts';
import {VERSION} from '../version.ts';
import {errorMessage} from '../core/errors.ts';

const USAGE = `usage: kube-discovery <command> [flags]      (kube-discovery <command> --help for details)

commands:
  start -c FILE [--deregister-on-exit]     run the discovery service
  once -c FILE [--output json|table] [--explain] [--force]
                                           run one discovery cycle and print what it did
  ls [--server URL] [-l|--selector k=v,...] [-o table|wide|name|json|yaml] [--show-labels] [--token-file F]
                                           list discovered clusters, like kubectl get
  kubeconfig [--server URL | -c FILE] [-o FILE] [--labels k=v,...] [--token-file F] [--exec-command PATH] [--exec-env NAME=VALUE]...
                                           write a kubeconfig for the discovered clusters
  token eks --cluster-name N --region R [--role-arn A] [--external-id X]
                                           print an ExecCredential for kubectl
  token aks (--server-id ID | --subscription S --resource-group G --name N) [--tenant-id T] [--client-id C]
            [--environment E] [--resource-manager-endpoint URL]
                                           print an ExecCredential with an Entra ID or local-account token
  configure eks --cluster-name N --region R --principal-arn ARN [--group G] [--apply] [--role-arn A [--external-id X]]
  configure aks --subscription S --resource-group G --name N --principal-id OID
                                           grant the discovery identity access to a cluster
  config check -c FILE                     validate a config and print the effective config
  version                                  print the version (also --version)

-c is short for --config, -o for --output, -l for --selector; -h / --help after any command prints its usage.
`;

// Commands load on first use: kubectl runs `token` for every request, so it must start fast.
const commands: Readonly<Record<string, Command>> = {
  start: async (argv, io) => (await import('./start.ts')).runStart(argv, io),
  once: async (argv, io) => (await import('./once.ts')).runOnce(argv, io),
  ls: async (argv, io) => (await import('./ls.ts')).runLs(argv, io),
  kubeconfig: async (argv, io) => (await import('./kubeconfig.ts')).runKubeconfig(argv, io),
  token: async (argv, io) => (await import('./token.ts')).runToken(argv, io),
  configure: async (argv, io) => (await import('./configure.ts')).runConfigure(argv, io),
  config: async (argv, io) => {
    if (argv[0] === 'check') return (await import('./config-check.ts')).runConfigCheck(argv.slice(1), io);
    io.stderr(`kube-discovery config: unknown sub-command ${JSON.stringify(argv[0] ?? '')}; known: check\n${commandUsage('config') ?? ''}`);
    return 2;
  },
  version: async (_argv, io) => {
    io.stdout(`${VERSION}\n`);
    return 0;
  },
};

/** Runs the CLI with `argv` (without node and script) and returns the exit code. */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    (name === undefined ? io.stderr : io.stdout)(USAGE);
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') return commands['version']!([], io);
  // Every credential in the environment is redacted by value from whatever the command prints.
  registerSecretsFromEnv(io.env);
  const command = commands[name];
  if (!command) {
    io.stderr(`kube-discovery: unknown command ${JSON.stringify(name)}; known: ${Object.keys(commands).join(', ')}\n${USAGE}`);
    return 2;
  }
  const usage = wantsHelp(rest) ? commandUsage(name) : undefined;
  if (usage !== undefined) {
    io.stdout(usage);
    return 0;
  }
  return command(rest, io);
}

if (import.meta.main) {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (error) {
    // Unexpected failures: one line, no stack, non-zero exit.
    process.stderr.write(`kube-discovery: ${errorMessage(error)}\n`);
    process.exitCode = 1;
  }
}
