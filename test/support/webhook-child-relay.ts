import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { waitFor } from './wait-for';
import { TYPESCRIPT_NODE_ARGS } from './child-relay';

/** A webhook relay child process. */
export interface WebhookChildRelay {
  process: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts `test/support/webhook-relay-child.ts` in a real Node process and waits for READY. */
export async function startWebhookChildRelay(env: {
  DATABASE_URL: string;
  WEBHOOK_URL: string;
  LEASE_MS: string;
  TIMEOUT_MS: string;
}): Promise<WebhookChildRelay> {
  const child = spawn(
    process.execPath,
    [...TYPESCRIPT_NODE_ARGS, join(__dirname, 'webhook-relay-child.ts')],
    {
      cwd: join(__dirname, '..', '..'),
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(
    () => {
      if (child.exitCode !== null)
        throw new Error(`webhook relay child exited with ${child.exitCode}: ${stderr}`);
      return stdout.split('\n').includes('READY');
    },
    { timeoutMs: 30_000, message: `the webhook relay child to be READY (stderr: ${stderr.slice(-500)})` },
  );
  return {
    process: child,
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
