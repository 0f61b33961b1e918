/**
 * What the soak reads at each window's boundary: the library's tables (bytes, dead tuples, deletes), the claims' and
 * due-tenant scans' calls and time from pg_stat_statements, this process's CPU and RSS, the relay's and producer's
 * backends' CPU, the load average. `soak-windows.ts` turns two readings into a window.
 */
import { loadavg } from 'node:os';
import { cpuSpentMs, readBackendCpu, type BackendCpuSample, type RowsQuery } from './backend-cpu';
import type { BenchDatabase } from './bench-database';
import type { SoakReading, StatementCounters } from './soak-windows';

/** `application_name` of the relay app's connections. */
export const RELAY_APP = 'bench-soak-relay';
/** `application_name` of the producer app's connections. */
export const PRODUCER_APP = 'bench-soak-producer';

/**
 * Reads the counters of a window's boundary. The backends' CPU is summed from one readable sample to the next
 * (a pool connection opened in between counts from zero); a boundary whose backends cannot be read (one closed
 * while being read, three times over) has none, and neither window beside it gets a figure.
 */
export class SoakReader {
  private readonly relay = new BackendCpuTotal([RELAY_APP]);
  private readonly producer = new BackendCpuTotal([PRODUCER_APP]);

  constructor(
    private readonly db: BenchDatabase,
    private readonly statements: boolean,
    /** The relay's metrics registry (`OutboxMetrics.registry`), whose fan-outs each reading counts; else none. */
    private readonly metrics: { metrics(): Promise<string> } | null = null,
  ) {}

  async read(atS: number, produced: number, handled: number): Promise<SoakReading> {
    const query = this.db.sql.bind(this.db);
    const relayCpu = await this.relay.read(query);
    const producerCpu = await this.producer.read(query);
    const node = process.cpuUsage();
    const tables = await this.db.sql<{
      name: string;
      table_bytes: string;
      index_bytes: string;
      dead: string;
      deleted: string;
    }>(
      // a partition that retention drops while this reads it waits for the drop, then has no size (null): it is
      // left out, as gone, rather than listed at 0 bytes (its range would count as kept with none of its bytes);
      // offset 0 keeps each size computed once
      `select * from (
         select s.relname as name, pg_table_size(s.relid)::text as table_bytes,
                pg_indexes_size(s.relid)::text as index_bytes, s.n_dead_tup::text as dead, s.n_tup_del::text as deleted
           from pg_stat_user_tables s
          where s.schemaname = 'public'
            and (s.relname like any (array['event\\_outbox%', 'consumer\\_inbox%', 'outbox\\_%']))
         offset 0
       ) t
       where t.table_bytes is not null and t.index_bytes is not null`,
    );
    const statements = this.statements ? await this.statementTotals() : null;
    return {
      atS,
      tables: Object.fromEntries(
        tables.map((t) => [
          t.name,
          {
            tableBytes: Number(t.table_bytes),
            indexBytes: Number(t.index_bytes),
            deadTuples: Number(t.dead),
            deletedTuples: Number(t.deleted),
          },
        ]),
      ),
      produced,
      handled,
      nodeCpuMs: (node.user + node.system) / 1000,
      relayBackendCpuMs: relayCpu,
      producerBackendCpuMs: producerCpu,
      rssBytes: process.memoryUsage().rss,
      loadAverage: loadavg()[0]!,
      claims: statements?.claims ?? null,
      dueScans: statements?.due ?? null,
      statements: this.statements ? await this.statementCounters() : null,
      ...(this.metrics ? { fanOuts: fanOutTotals(await this.metrics.metrics()) } : {}),
    };
  }

  /**
   * Every statement of the bench database so far, by `queryid`: with tracking `all` (see `StatementStats.enable`),
   * the statements inside the library's functions (the due-tenant scan's) are listed on their own.
   */
  private async statementCounters(): Promise<Record<string, StatementCounters>> {
    const rows = await this.db.sql<{ id: string; query: string; calls: string; ms: number; buffers: string }>(
      `select queryid::text as id, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) as query, calls::text as calls,
              total_exec_time::float8 as ms, (shared_blks_hit + shared_blks_read)::text as buffers
         from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())`,
    );
    return Object.fromEntries(
      rows.map((r) => [
        r.id,
        { query: r.query, calls: Number(r.calls), execMs: r.ms, buffers: Number(r.buffers) },
      ]),
    );
  }

  /** The claims (new events, due retries) and the due-tenant scans so far. */
  private async statementTotals(): Promise<{
    claims: { calls: number; execMs: number };
    due: { calls: number; execMs: number };
  }> {
    const [row] = await this.db.sql<{ cc: string; cm: number; dc: string; dm: number }>(
      `select coalesce(sum(calls) filter (where query like any($1::text[])), 0)::text as cc,
              coalesce(sum(total_exec_time) filter (where query like any($1::text[])), 0)::float8 as cm,
              coalesce(sum(calls) filter (where query like '%outbox_due_tenants%'), 0)::text as dc,
              coalesce(sum(total_exec_time) filter (where query like '%outbox_due_tenants%'), 0)::float8 as dm
         from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())`,
      [['with fresh as%', 'with retry as%']],
    );
    return {
      claims: { calls: Number(row!.cc), execMs: row!.cm },
      due: { calls: Number(row!.dc), execMs: row!.dm },
    };
  }
}

/** CPU of the backends of some `application_name`s, summed since the first reading. */
class BackendCpuTotal {
  private sample: BackendCpuSample = null;
  private total = 0;

  constructor(private readonly applicationNames: readonly string[]) {}

  /** Milliseconds since the first reading, or null when the backends cannot be read now. */
  async read(query: RowsQuery): Promise<number | null> {
    let sample: BackendCpuSample = null;
    for (let attempt = 0; attempt < 3 && sample === null; attempt++)
      sample = await readBackendCpu(query, this.applicationNames);
    if (sample === null) return null;
    this.total += cpuSpentMs(this.sample ?? sample, sample) ?? 0;
    this.sample = sample;
    return this.total;
  }
}

/** The relay's fan-outs so far by reason, from the metrics' text (`outbox_relay_fan_outs_total{reason="…"} n`). */
export function fanOutTotals(exposition: string): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const [, reason, n] of exposition.matchAll(
    /^outbox_relay_fan_outs_total\{reason="([^"]+)"\} (\d+)$/gm,
  ))
    totals[reason!] = Number(n);
  return totals;
}
