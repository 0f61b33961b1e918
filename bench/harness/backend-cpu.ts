/**
 * CPU time of PostgreSQL backends, read from /proc: only when the server runs on this machine (embedded, or a
 * local DATABASE_URL). Backends are found by `application_name`; a backend opened in between counts from zero,
 * one closed in between is lost, so a measurement keeps its connections open until it has read the CPU.
 */
import { readFileSync } from 'node:fs';
import { Client, type QueryResultRow } from 'pg';

/** Runs one query and returns its rows (a `pg` client's, or `BenchDatabase.sql`). */
export type RowsQuery = <T extends QueryResultRow>(text: string, values?: unknown[]) => Promise<T[]>;

/** CPU milliseconds per backend pid, or null when the server's processes cannot be read. */
export type BackendCpuSample = Map<number, number> | null;

const MS_PER_TICK = 1000 / 100; // USER_HZ: 100 on Linux

/** Milliseconds of CPU per backend pid of the given `application_name`s, or null when one cannot be read. */
export async function readBackendCpu(
  query: RowsQuery,
  applicationNames: readonly string[],
): Promise<BackendCpuSample> {
  const rows = await query<{ pid: number }>(
    'select pid from pg_stat_activity where application_name = any($1::text[])',
    [applicationNames],
  );
  const totals = new Map<number, number>();
  for (const { pid } of rows) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      return null;
    }
    // `pid (comm) state …`: a process of this machine that is not postgres means the server is elsewhere
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    if (!comm.startsWith('postgres')) return null;
    // after `(comm) `, field 0 is the state (field 3 of the line); utime and stime are fields 14 and 15
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    totals.set(pid, (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK);
  }
  return totals;
}

/** CPU spent between two samples (backends new in `after` count from zero), or null when either is. */
export function cpuSpentMs(before: BackendCpuSample, after: BackendCpuSample): number | null {
  if (before === null || after === null) return null;
  let ms = 0;
  for (const [pid, total] of after) ms += total - (before.get(pid) ?? 0);
  return ms;
}

/** The CPU of one set of backends from `open` to `spentMs`, on a connection of its own. */
export class BackendCpu {
  private constructor(
    private readonly client: Client | null,
    private readonly applicationNames: readonly string[],
    private readonly before: BackendCpuSample,
  ) {}

  static async open(url: string, applicationNames: readonly string[]): Promise<BackendCpu> {
    const client = new Client({ connectionString: url, application_name: 'bench-cpu-probe' });
    await client.connect();
    const before = await readBackendCpu(rowsOf(client), applicationNames);
    if (before !== null) return new BackendCpu(client, applicationNames, before);
    await client.end();
    return new BackendCpu(null, applicationNames, null);
  }

  /** CPU spent since `open`, or null when the backends' processes cannot be read. Closes the connection. */
  async spentMs(): Promise<number | null> {
    if (!this.client) return null;
    try {
      return cpuSpentMs(this.before, await readBackendCpu(rowsOf(this.client), this.applicationNames));
    } finally {
      await this.client.end();
    }
  }
}

function rowsOf(client: Client): RowsQuery {
  return async <T extends QueryResultRow>(text: string, values?: unknown[]) =>
    (await client.query<T>(text, values)).rows;
}
