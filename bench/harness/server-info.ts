/** What the figures were measured on: the machine, Node, PostgreSQL and its settings; and how WAL flushes are counted. */
import { cpus, loadavg, totalmem } from 'node:os';
import type { BenchDatabase } from './bench-database';

const SETTINGS = [
  'shared_buffers',
  'synchronous_commit',
  'fsync',
  'wal_level',
  'max_wal_size',
  'commit_delay',
  'commit_siblings',
  'full_page_writes',
  'data_checksums',
  'wal_sync_method',
];

/** The header of a run: printable lines and the same facts for JSON. */
export interface EnvironmentDescription {
  lines: string[];
  facts: Record<string, unknown>;
}

/** Describes the machine and the server behind `db`. */
export async function describeEnvironment(
  db: BenchDatabase,
  source: string,
  flushes: WalFlushCounter,
): Promise<EnvironmentDescription> {
  const [version] = await db.sql<{ server_version: string }>('show server_version');
  const settings = await db.sql<{ name: string; setting: string; unit: string | null }>(
    `select name, setting, unit from pg_settings where name = any($1::text[]) order by array_position($1::text[], name)`,
    [SETTINGS],
  );
  const shown = settings.map((s) => `${s.name}=${withUnit(s.setting, s.unit)}`);
  const cpuList = cpus();
  const memoryGiB = totalmem() / 1024 ** 3;
  const facts = {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(memoryGiB * 10) / 10,
    loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
    node: process.version,
    postgres: version!.server_version,
    database: source,
    settings: Object.fromEntries(settings.map((s) => [s.name, withUnit(s.setting, s.unit)])),
    walFlushSource: flushes.source ?? 'unavailable',
  };
  return {
    facts,
    lines: [
      `machine: ${facts.cpus} CPUs (${facts.cpuModel}), ${facts.memoryGiB} GiB memory, ` +
        `load average ${facts.loadAverage1m} at start; Node ${facts.node}`,
      `PostgreSQL ${facts.postgres} (${source})`,
      `settings: ${shown.join(', ')}`,
      `WAL flushes counted from ${facts.walFlushSource}; autovacuum off on the bench tables (each load is vacuumed and analyzed)`,
    ],
  };
}

/** `16384` × `8kB` → `128MB`, the way `SHOW` prints it. */
function withUnit(setting: string, unit: string | null): string {
  if (!unit) return setting;
  const match = /^(\d+)?(kB|MB|GB|B)$/.exec(unit);
  if (!match) return `${setting}${unit}`;
  const factor =
    Number(match[1] ?? 1) *
    { B: 1 / 1024, kB: 1, MB: 1024, GB: 1024 * 1024 }[match[2] as 'B' | 'kB' | 'MB' | 'GB'];
  const kb = Number(setting) * factor;
  if (kb >= 1024 * 1024 && kb % (1024 * 1024) === 0) return `${kb / 1024 / 1024}GB`;
  if (kb >= 1024 && kb % 1024 === 0) return `${kb / 1024}MB`;
  return `${kb}kB`;
}

/**
 * Counts WAL flushes (fsyncs of WAL), to compute commits per flush: how well group commit works. PostgreSQL up
 * to 17 has `pg_stat_wal.wal_sync`; 18 moved it to `pg_stat_io` (object `wal`, column `fsyncs`). Backends
 * publish these counters lazily (at most once a second, and when they exit), so a measurement closes its
 * sessions and waits for them to end before reading.
 */
export class WalFlushCounter {
  private constructor(
    private readonly db: BenchDatabase,
    private readonly query: string | null,
    readonly source: string | null,
  ) {}

  static async detect(db: BenchDatabase): Promise<WalFlushCounter> {
    const columns = await db.sql<{ view: string; column: string }>(
      `select c.relname as view, a.attname as column
         from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'pg_catalog'
          and ((c.relname = 'pg_stat_wal' and a.attname = 'wal_sync') or (c.relname = 'pg_stat_io' and a.attname = 'fsyncs'))`,
    );
    const has = (view: string): boolean => columns.some((c) => c.view === view);
    if (has('pg_stat_wal')) {
      return new WalFlushCounter(
        db,
        'select wal_sync::bigint::text as n from pg_stat_wal',
        'pg_stat_wal.wal_sync',
      );
    }
    if (has('pg_stat_io')) {
      return new WalFlushCounter(
        db,
        `select coalesce(sum(fsyncs), 0)::bigint::text as n from pg_stat_io where object = 'wal' and context = 'normal'`,
        "pg_stat_io.fsyncs (object 'wal')",
      );
    }
    return new WalFlushCounter(db, null, null);
  }

  /** The server-wide count so far, or null when this server does not expose it. */
  async read(): Promise<number | null> {
    if (!this.query) return null;
    // Our own session's pending counters too (the admin connection truncates and checkpoints between runs).
    await this.db.sql('select pg_stat_force_next_flush()');
    await this.db.sql('select pg_stat_clear_snapshot()');
    const [row] = await this.db.sql<{ n: string }>(this.query);
    return Number(row!.n);
  }
}
