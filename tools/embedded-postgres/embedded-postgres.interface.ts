/** Options for {@link startEmbeddedPostgres}. */
export interface EmbeddedPostgresOptions {
  /** Cluster folder. Default: a fresh temp folder, or (persistent) a fixed one under the OS temp folder. */
  dataDir?: string;
  /** TCP port on 127.0.0.1. Default: a free port picked at start. */
  port?: number;
  /** Keep the cluster between runs (demo app). Default false: a throwaway cluster, deleted on stop. */
  persistent?: boolean;
  /** Receives the launcher's progress lines (the server log is `<dataDir>/embedded-postgres.log`). */
  log?: (line: string) => void;
  /** Extra server settings, passed as `-c name=value`; they override the launcher's defaults. */
  settings?: Record<string, string>;
}

/** A running embedded PostgreSQL server. */
export interface EmbeddedPostgres {
  /** Connection string: `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string;
  readonly port: number;
  /** Where the cluster lives (as root, may differ from the requested folder: see the log). */
  readonly dataDir: string;
  /** Server version as `SHOW server_version` prints it, e.g. `18.4`. */
  readonly version: string;
  /** Stops the server (and deletes a throwaway cluster). Idempotent: concurrent callers share one promise. */
  stop(): Promise<void>;
  /** Shuts down (`fast`, or `immediate` = crash-like) and starts again on the same port and data. */
  restart(mode?: ShutdownMode): Promise<void>;
}

/** pg_ctl's `-m`: `fast` rolls back open transactions and checkpoints; `immediate` is crash-like. */
export type ShutdownMode = 'fast' | 'immediate';

/** Receives the launcher's progress lines. */
export type Log = (line: string) => void;
