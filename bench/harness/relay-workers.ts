/** Runs relay workers in child processes side by side and times them from a common start to the last finish. */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { now } from './stats';
import {
  WORKER_CONFIG_ENV,
  type FromWorker,
  type RelayWorkerResult,
  type ToWorker,
} from '../workers/relay-worker.protocol';

/** What a set of workers did together. */
export interface RelayWorkersOutcome {
  /** From `go` to the last worker's `done`, as seen by the bench. */
  elapsedMs: number;
  events: number;
  results: RelayWorkerResult[];
}

const WORKER_FILE = join(__dirname, '..', 'workers', 'relay-worker.js');
const BOOT_TIMEOUT_MS = 60_000;

/** What a worker process is given: its kind (for messages), and whether it samples memory. */
export interface WorkerConfig {
  kind: string;
  sampleMemory?: boolean;
}

/** Options of {@link runRelayWorkers} beyond the configs. */
export interface RunWorkersOptions {
  /** The compiled worker script; default `workers/relay-worker.js` (any script speaking its protocol). */
  workerFile?: string;
  /** Runs once every worker is ready, before `go`: what it does is not timed. */
  beforeGo?: () => Promise<void>;
}

/** Starts one worker per config, waits until all are ready, starts them together, and waits for all to finish. */
export async function runRelayWorkers<C extends WorkerConfig>(
  configs: readonly C[],
  timeoutMs = 15 * 60_000,
  options: RunWorkersOptions = {},
): Promise<RelayWorkersOutcome> {
  const workers = configs.map((config) => startWorker(config, options.workerFile ?? WORKER_FILE));
  try {
    await withTimeout(Promise.all(workers.map((w) => w.ready)), BOOT_TIMEOUT_MS, 'relay workers to boot');
    await options.beforeGo?.();
    const began = now();
    for (const w of workers) w.child.send({ type: 'go' } satisfies ToWorker);
    const results = await withTimeout(
      Promise.all(workers.map((w) => w.done)),
      timeoutMs,
      'relay workers to drain',
    );
    const elapsedMs = now() - began;
    await Promise.all(workers.map((w) => w.exited));
    return { elapsedMs, events: results.reduce((sum, r) => sum + r.events, 0), results };
  } finally {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }
}

interface StartedWorker {
  child: ChildProcess;
  ready: Promise<void>;
  done: Promise<RelayWorkerResult>;
  exited: Promise<void>;
}

function startWorker(config: WorkerConfig, file: string): StartedWorker {
  const child = fork(file, [], {
    env: { ...process.env, [WORKER_CONFIG_ENV]: JSON.stringify(config) },
    // Memory sampling collects garbage before each sample, to see memory kept rather than garbage pending.
    execArgv: config.sampleMemory ? ['--expose-gc'] : [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const name = `${config.kind} worker (pid ${child.pid})`;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (message: FromWorker) => {
      if (message.type === 'ready') resolve();
      if (message.type === 'failed') reject(new Error(`${name} failed: ${message.error}`));
    });
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code} before it was ready`)));
  });
  const done = new Promise<RelayWorkerResult>((resolve, reject) => {
    child.on('message', (message: FromWorker) => {
      if (message.type === 'done') resolve(message.result);
      if (message.type === 'failed') reject(new Error(`${name} failed: ${message.error}`));
    });
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code} before it was done`)));
  });
  // Either may settle first; the other must not surface as an unhandled rejection.
  ready.catch(() => undefined);
  done.catch(() => undefined);
  return { child, ready, done, exited };
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
