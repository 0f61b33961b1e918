/**
 * The benchmark's own database: created fresh on the server from `resolveDatabase()`, migrated with the
 * outbox migrations plus a business table and a consumer effects table, and dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { Client, type QueryResultRow } from 'pg';
import { DataSource } from 'typeorm';
import { outboxMigrations } from 'nestjs-pg-outbox';
import { partitionedLayoutStatements } from '../../test/support/template-database';
import { partitionInMinutes } from './bench-floors';

/** The outbox tables as the migrations leave them, or converted to the partitioned layout (docs/partitioning.md). */
export type BenchLayout = 'unpartitioned' | 'partitioned';

/** The tenant every benchmark event belongs to. */
export const BENCH_TENANT = '5eb0a1c4-0000-4000-8000-000000000001';
/** The event name every benchmark consumer listens to. */
export const BENCH_EVENT = 'bench.contact.created.v1';

const BENCH_TABLES = [
  `create table public.contacts (
     id uuid primary key,
     tenant_id uuid not null,
     name text not null,
     email text not null,
     created_at timestamptz not null default now()
   )`,
  `create table public.consumer_effects (
     id bigint generated always as identity primary key,
     event_id uuid not null,
     consumer text not null,
     created_at timestamptz not null default now()
   )`,
];

const OUTBOX_TABLES = ['event_outbox', 'outbox_deliveries', 'consumer_inbox'];
const ALL_TABLES = [...OUTBOX_TABLES, 'contacts', 'consumer_effects'];

/** A payload like the demo CRM's, built in SQL from a contact id and a row number `g`. */
const PAYLOAD_SQL = `jsonb_build_object('contactId', c.contact_id, 'name', 'Contact ' || c.g,
                                         'email', 'contact' || c.g || '@example.com')`;

/** A throwaway database and an admin connection to it. */
export class BenchDatabase {
  private constructor(
    private readonly serverUrl: string,
    readonly name: string,
    readonly url: string,
    private readonly admin: Client,
  ) {}

  /**
   * Creates `outbox_bench_<random>` on the server, migrates it, and connects. `partitioned`: then converted as the
   * test suites' template is with OUTBOX_TEST_PARTITIONED=1 (daily ranges from yesterday to three days ahead), or
   * with ranges of `rangeMinutes` from now (BENCH ONLY, below the library's minimum: bench-floors.ts).
   */
  static async create(
    serverUrl: string,
    layout: BenchLayout = 'unpartitioned',
    rangeMinutes: number | null = null,
  ): Promise<BenchDatabase> {
    const name = `outbox_bench_${randomBytes(5).toString('hex')}`;
    await withClient(serverUrl, (c) => c.query(`create database ${name}`));
    const url = withDatabase(serverUrl, name);
    const migrator = new DataSource({
      type: 'postgres',
      url,
      migrations: outboxMigrations,
      migrationsRun: false,
      logging: false,
    });
    await migrator.initialize();
    try {
      await migrator.runMigrations({ transaction: 'each' });
      for (const statement of BENCH_TABLES) await migrator.query(statement);
    } finally {
      await migrator.destroy();
    }
    const admin = new Client({ connectionString: url, application_name: 'bench-admin' });
    await admin.connect();
    const db = new BenchDatabase(serverUrl, name, url, admin);
    if (layout === 'partitioned' && rangeMinutes !== null) await partitionInMinutes(db, rangeMinutes);
    else if (layout === 'partitioned')
      for (const statement of partitionedLayoutStatements(new Date(Date.now() - 86_400_000)))
        await db.sql(statement);
    // Autovacuum off on these tables: a vacuum that starts in the middle of one run and not another would
    // move its time and WAL. Each load is followed by an explicit `vacuum analyze` instead.
    await db.setAutovacuum(ALL_TABLES, false);
    return db;
  }

  /**
   * Turns autovacuum on or off (back to the server's setting) for `tables`, on their partitions in the partitioned
   * layout (a partitioned table takes no storage parameters; a range made later has the server's setting).
   */
  async setAutovacuum(tables: readonly string[], enabled: boolean): Promise<void> {
    for (const name of await this.leaves(tables))
      await this.sql(
        enabled
          ? `alter table ${name} reset (autovacuum_enabled)`
          : `alter table ${name} set (autovacuum_enabled = false)`,
      );
  }

  async sql<T extends QueryResultRow = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<T[]> {
    return (await this.admin.query<T>(text, values)).rows;
  }

  /**
   * Empties every table of the schema: the outbox's (including its persisted consumer registry, so a consumer
   * registered by an earlier scenario's app gets no delivery rows in the next one) and the bench's own. TypeORM's
   * `migrations` table keeps its rows: the doctor the soak asks would otherwise report every migration missing. So
   * does `outbox_partitioning`: without its row the partitioned layout's functions (retention, the ranges made
   * ahead) would take the tables for unpartitioned ones.
   */
  async truncate(): Promise<void> {
    const tables = await this.sql<{ name: string }>(
      `select format('%I.%I', schemaname, tablename) as name from pg_tables
        where schemaname = 'public' and tablename not in ('migrations', 'outbox_partitioning')`,
    );
    await this.sql(`truncate ${tables.map((t) => t.name).join(', ')} restart identity cascade`);
  }

  /** Flushes dirty pages now, so that no run pays for an earlier run's checkpoint and WAL starts clean. */
  async checkpoint(): Promise<void> {
    await this.sql('checkpoint');
  }

  /** Refreshes planner statistics and the visibility map after a load, as autovacuum eventually would. */
  async vacuumAnalyze(): Promise<void> {
    for (const table of ALL_TABLES) await this.sql(`vacuum (analyze) public.${table}`);
  }

  /**
   * Truncates, checkpoints, then loads `count` pending events and analyzes. A run that follows generates no
   * full-page images for these pages (they are newer than the checkpoint), so its WAL bytes are comparable.
   */
  async resetWithPendingEvents(count: number): Promise<void> {
    await this.truncate();
    await this.checkpoint();
    await this.loadPendingEvents(count);
    await this.sql('analyze');
  }

  /** Inserts `count` pending events of `tenantId`, as `enqueue` would have (time-ordered ids, like its UUIDv7). */
  async loadPendingEvents(count: number, tenantId = BENCH_TENANT): Promise<void> {
    for (let done = 0; done < count; done += LOAD_CHUNK) {
      const n = Math.min(LOAD_CHUNK, count - done);
      await this.sql(
        `insert into public.event_outbox (id, tenant_id, event_name, payload, aggregate_type, aggregate_id)
         select ${timeOrderedId('clock_timestamp()')}, $1, $2, ${PAYLOAD_SQL}, 'contact', c.contact_id::text
           from (select g, gen_random_uuid() as contact_id from generate_series($3::int, $4::int) g) c`,
        [tenantId, BENCH_EVENT, done + 1, done + n],
      );
    }
  }

  /**
   * Inserts `count` events already published, each with a delivered delivery row and an inbox row per consumer:
   * the history a long-running outbox accumulates. One statement per table, with the three tables' indexes dropped
   * and built again afterwards from their own definitions (10 million events in minutes, not hours); the caller
   * analyzes ({@link vacuumAnalyze}) before measuring.
   */
  async loadPublishedHistory(count: number, consumers: readonly string[]): Promise<void> {
    const [last] = await this.sql<{ seq: string }>(
      `select coalesce(max(seq), 0)::text as seq from public.event_outbox`,
    );
    await this.withoutIndexes(OUTBOX_TABLES, async () => {
      await this.sql(
        `insert into public.event_outbox (id, tenant_id, event_name, payload, aggregate_type, aggregate_id,
                                          status, attempts, deliveries_open, published_at, occurred_at, created_at)
         select ${timeOrderedId("clock_timestamp() - interval '1 day'")}, $1, $2, ${PAYLOAD_SQL}, 'contact', c.contact_id::text,
                'published', 1, 0, now(), now() - interval '1 day', now() - interval '1 day'
           from (select g, gen_random_uuid() as contact_id from generate_series(1, $3::int) g) c`,
        [BENCH_TENANT, BENCH_EVENT, count],
      );
      await this.sql(
        `insert into public.outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, processed_at)
         select e.id, e.tenant_id, k.name, e.seq, 'delivered', 1, now()
           from public.event_outbox e cross join unnest($2::text[]) as k(name) where e.seq > $1::bigint`,
        [last!.seq, consumers],
      );
      await this.sql(
        `insert into public.consumer_inbox (event_id, consumer_name, tenant_id)
         select e.id, k.name, e.tenant_id
           from public.event_outbox e cross join unnest($2::text[]) as k(name) where e.seq > $1::bigint`,
        [last!.seq, consumers],
      );
    });
  }

  /**
   * Runs `load` with every index of `tables` dropped (the constraints' too), then builds them again from the
   * definitions read before, and checks that the same definitions are back: what is measured afterwards runs on
   * the indexes the migrations (and the partitioned layout's conversion) made. Nothing references these tables.
   */
  private async withoutIndexes(tables: readonly string[], load: () => Promise<void>): Promise<void> {
    const relations = tables.map((t) => `public.${t}`);
    // every index of the tables and of their partitions, valid or not, without its name (a partition's index made
    // from its parent's is named after its columns)
    const definitions = async (): Promise<string> =>
      (
        await this.sql<{ definition: string }>(
          `select regexp_replace(pg_get_indexdef(indexrelid), '^(CREATE (UNIQUE )?INDEX) \\S+ ON', '\\1 ON')
                  || case when indisvalid then '' else ' (invalid)' end as definition
             from pg_index where indrelid = any($1::regclass[]) order by 1`,
          [[...relations, ...(await this.leaves(tables))]],
        )
      )
        .map((row) => row.definition)
        .join('\n');
    const before = await definitions();
    const constraints = await this.sql<{ drop: string; add: string }>(
      `select format('alter table %s drop constraint %I', conrelid::regclass, conname) as drop,
              format('alter table %s add constraint %I %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) as add
         from pg_constraint where conrelid = any($1::regclass[]) and contype in ('p', 'u', 'x')`,
      [relations],
    );
    // a partitioned table's index reads "on only": made so, it would cover none of the partitions
    const indexes = await this.sql<{ drop: string; add: string }>(
      `select format('drop index %s', indexrelid::regclass) as drop,
              replace(pg_get_indexdef(indexrelid), ' ON ONLY ', ' ON ') as add
         from pg_index i
        where indrelid = any($1::regclass[]) and not exists (select from pg_constraint c where c.conindid = i.indexrelid)`,
      [relations],
    );
    for (const { drop } of [...constraints, ...indexes]) await this.sql(drop);
    await load();
    await this.sql(`set maintenance_work_mem = '1GB'`);
    try {
      for (const { add } of [...constraints, ...indexes]) await this.sql(add);
    } finally {
      await this.sql('reset maintenance_work_mem');
    }
    const after = await definitions();
    if (after !== before)
      throw new Error(`the indexes rebuilt differ from those before the load:\n${before}\nvs\n${after}`);
  }

  /** Bytes of the outbox tables and their indexes (every partition of them in the partitioned layout). */
  async outboxBytes(): Promise<number> {
    const [row] = await this.sql<{ bytes: string }>(
      `select sum(pg_total_relation_size(name::regclass))::text as bytes from unnest($1::text[]) as name`,
      [await this.leaves(OUTBOX_TABLES)],
    );
    return Number(row!.bytes);
  }

  /** `tables` (of schema public) themselves, or their partitions where they are partitioned. */
  private async leaves(tables: readonly string[]): Promise<string[]> {
    const rows = await this.sql<{ name: string }>(
      `select t.rel::text as name from unnest($1::regclass[]) as t(rel) join pg_class c on c.oid = t.rel
        where c.relkind = 'r'
       union all
       select p.relid::regclass::text from unnest($1::regclass[]) as t(rel), pg_partition_tree(t.rel) p where p.isleaf`,
      [tables.map((t) => `public.${t}`)],
    );
    return rows.map((row) => row.name);
  }

  /** Rows per outbox table and how many events are not yet settled. */
  async counts(): Promise<{
    events: number;
    unsettled: number;
    deliveries: number;
    inbox: number;
    effects: number;
  }> {
    const [row] = await this.sql<{
      events: number;
      unsettled: number;
      deliveries: number;
      inbox: number;
      effects: number;
    }>(
      `select (select count(*) from public.event_outbox)::int as events,
              (select count(*) from public.event_outbox where status not in ('published', 'no_handlers'))::int as unsettled,
              (select count(*) from public.outbox_deliveries)::int as deliveries,
              (select count(*) from public.consumer_inbox)::int as inbox,
              (select count(*) from public.consumer_effects)::int as effects`,
    );
    return row!;
  }

  /** Where WAL is being inserted now, as a byte position. */
  async walPosition(): Promise<bigint> {
    const [row] = await this.sql<{ pos: string }>(
      `select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::text as pos`,
    );
    return BigInt(row!.pos);
  }

  /** WAL bytes written since `from` (a {@link walPosition}). */
  async walBytesSince(from: bigint): Promise<number> {
    return Number((await this.walPosition()) - from);
  }

  /** Waits until no connection with this `application_name` is left, so the closed sessions' statistics are flushed. */
  async waitForSessionsToEnd(applicationName: string, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const [row] = await this.sql<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where application_name = $1`,
        [applicationName],
      );
      if (row!.n === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** Closes the admin connection and drops the database (forcing out stray sessions). Safe to call twice. */
  async drop(): Promise<void> {
    await this.admin.end().catch(() => undefined);
    await withClient(this.serverUrl, (c) => c.query(`drop database if exists ${this.name} with (force)`));
  }
}

/** Rows per load statement: large enough to be fast, small enough to keep each transaction modest. */
const LOAD_CHUNK = 100_000;

async function withClient<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url, application_name: 'bench-admin' });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** `url` pointing at database `name` instead. */
export function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/**
 * A UUID whose first 48 bits are the milliseconds of `at`, like the UUIDv7 ids `enqueue` generates (PostgreSQL 15
 * has no uuidv7()): loaded rows then sit in the indexes where the library's own rows would.
 */
function timeOrderedId(at: string): string {
  return `(lpad(to_hex(floor(extract(epoch from ${at}) * 1000)::bigint), 12, '0') || '7' || substr(md5(random()::text), 1, 19))::uuid`;
}
