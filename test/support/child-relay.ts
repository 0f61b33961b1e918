import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { CHILD_REGISTER_ENV } from './children-build';
import { waitFor } from './wait-for';

/** A relay child process and the lines it printed. */
export interface ChildRelay {
  process: ChildProcess;
  lines: string[];
  /** Waits for a printed line that starts with `prefix`; returns it. */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  /** Kills the process and waits for it to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Sends a signal that does not end the process (SIGSTOP, SIGCONT). */
  signal(signal: NodeJS.Signals): void;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
}

/**
 * How tests run a TypeScript file in a process of its own: the workspace package resolves to its source (the
 * `@nestjs-pg-outbox/source` export condition), so no build of the package is needed first. The require hook is the
 * run's build from global-setup (children-build.ts), or `@swc-node/register` (swc compiles on the fly) in a run
 * without it.
 */
export const TYPESCRIPT_NODE_ARGS = [
  '--conditions=@nestjs-pg-outbox/source',
  '-r',
  process.env[CHILD_REGISTER_ENV] ?? '@swc-node/register',
];

/** Starts a relay script (default `test/support/relay-child.ts`) in a real Node process. */
export async function startChildRelay(
  env: Record<string, string>,
  { waitReady = true, script = join(__dirname, 'relay-child.ts') } = {},
): Promise<ChildRelay> {
  const child = spawn(process.execPath, [...TYPESCRIPT_NODE_ARGS, script], {
    cwd: join(__dirname, '..', '..'),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const relay: ChildRelay = {
    process: child,
    lines,
    line: (prefix, timeoutMs = 20_000) =>
      waitFor(
        () => {
          if (child.exitCode !== null)
            throw new Error(`relay child exited with ${child.exitCode}: ${stderr}`);
          return lines.find((l) => l.startsWith(prefix));
        },
        { timeoutMs, message: `child line "${prefix}" (stderr: ${stderr.slice(-500)})` },
      ),
    exited,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
  if (waitReady) await relay.line('READY', 30_000);
  return relay;
}
