/** Chooses the database for tests, benchmarks and the demo: `DATABASE_URL` when set, else an embedded one. */
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded-postgres';

/** Options for {@link resolveDatabase}. */
export interface ResolveDatabaseOptions {
  /** Keep the embedded cluster in this folder between runs; without it the cluster is throwaway. */
  persistentDir?: string;
  /** Receives progress lines of the embedded launcher. */
  log?: (line: string) => void;
  /** Extra settings of the embedded server (`-c name=value`); ignored with `DATABASE_URL`. */
  settings?: Record<string, string>;
}

/** A database to connect to, and how to release it. */
export interface ResolvedDatabase {
  url: string;
  /** The embedded server, or null when `DATABASE_URL` points at an external database. */
  embedded: EmbeddedPostgres | null;
  /** Stops the embedded server; a no-op for an external database, which is not ours to stop. */
  stop(): Promise<void>;
}

/** Uses `DATABASE_URL` when set, else starts an embedded PostgreSQL (persistent with `persistentDir`). */
export async function resolveDatabase(options: ResolveDatabaseOptions = {}): Promise<ResolvedDatabase> {
  const external = process.env.DATABASE_URL?.trim();
  if (external) return { url: external, embedded: null, stop: (): Promise<void> => Promise.resolve() };
  const embedded = await startEmbeddedPostgres({
    dataDir: options.persistentDir,
    persistent: options.persistentDir !== undefined,
    log: options.log,
    settings: options.settings,
  });
  return { url: embedded.url, embedded, stop: (): Promise<void> => embedded.stop() };
}
