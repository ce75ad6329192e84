/** Temporarily sets process.env variables for code that reads them (the AWS SDK does). */

/** Sets `vars` (undefined deletes) and returns a function restoring the previous values. */
export function setEnv(vars: Readonly<Record<string, string | undefined>>): () => void {
  const previous: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(vars)) {
    previous[key] = process.env[key];
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  return () => {
    for (const [key, value] of Object.entries(previous)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  };
}

/** A CliIo that captures output. */
export function captureIo(env: Readonly<Record<string, string | undefined>> = process.env) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: {stdout: (t: string) => void out.push(t), stderr: (t: string) => void err.push(t), env, isTty: false},
    stdout: () => out.join(''),
    stderr: () => err.join(''),
  };
}
