import { Client } from 'pg';
import type { SqlStatement } from './sql/statement';

/** A connection of the doctor's own (`npx nestjs-pg-outbox doctor`), outside any app. */
export interface DoctorConnection {
  /** Runs one statement (read-only: the session is set so) and returns its rows. */
  query<T>(statement: SqlStatement): Promise<T[]>;
  close(): Promise<void>;
}

/**
 * Opens a connection to `url` for the doctor, read-only and named `nestjs-pg-outbox doctor` in
 * `pg_stat_activity`, with a statement timeout so that a locked catalog never hangs an on-call engineer's shell.
 */
export async function openDoctorConnection(
  url: string,
  statementTimeoutMs = 30_000,
): Promise<DoctorConnection> {
  const client = new Client({
    connectionString: url,
    application_name: 'nestjs-pg-outbox doctor',
    statement_timeout: statementTimeoutMs,
    connectionTimeoutMillis: 10_000,
  });
  await client.connect();
  try {
    await client.query('set default_transaction_read_only = on');
  } catch (error) {
    await client.end().catch(() => undefined);
    throw error;
  }
  return {
    query: async <T>(statement: SqlStatement) =>
      (await client.query(statement.text, statement.values)).rows as T[],
    close: () => client.end(),
  };
}
