/**
 * The worker side of the protocol in `relay-worker.protocol.ts`, shared by every worker script: read the
 * config, say `ready` and wait for `go`, report to the bench, and exit cleanly or with the failure.
 */
import { WORKER_CONFIG_ENV, type FromWorker, type ToWorker } from './relay-worker.protocol';

export function sendToBench(message: FromWorker): void {
  process.send?.(message);
}

/** This worker's config from `BENCH_RELAY_WORKER`; `script` names it in the error when run by hand. */
export function readWorkerConfig<T>(script: string): T {
  const config = JSON.parse(process.env[WORKER_CONFIG_ENV] ?? 'null') as T | null;
  if (!config || !process.send) throw new Error(`${script} runs under fork() with ${WORKER_CONFIG_ENV} set`);
  // The bench went away (crash, Ctrl-C): do not linger holding connections.
  process.on('disconnect', () => process.exit(1));
  return config;
}

/** Says `ready` and resolves on `go`. */
export function readyThenGo(): Promise<void> {
  return new Promise<void>((resolve) => {
    process.on('message', (message: ToWorker) => {
      if (message.type === 'go') resolve();
    });
    sendToBench({ type: 'ready' });
  });
}

/** Runs the worker's `main`, reporting a failure to the bench before leaving. */
export function runWorker(main: () => Promise<void>): void {
  main().then(
    () => process.disconnect?.(),
    (error: unknown) => {
      sendToBench({
        type: 'failed',
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      });
      process.exitCode = 1;
      process.disconnect?.();
    },
  );
}
