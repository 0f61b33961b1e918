/** The start and the end of a relay child process (relay-child.ts, webhook-relay-child.ts). */

/** Runs the child's `main`; a failure to start is printed and exits with 1. */
export function runChildMain(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    process.stderr.write(`${String(error)}\n`);
    process.exit(1);
  });
}

/** On SIGTERM: closes the app, then exits with 0 (with 1, the error printed, when closing failed). */
export function closeOnSigterm(close: () => Promise<void>): void {
  process.on('SIGTERM', () => {
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`close failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  });
}
