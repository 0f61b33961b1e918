/**
 * `[DATABASE_URL=…] [EVENTS=20000] [TURNS=2] node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/lease-vacuum-hold.ts`
 *
 * The relay's vacuums of `outbox_event_leases` while a snapshot is held (ADR 0601's addendum): `drain()` of EVENTS
 * pending events (two no-op consumers, batches growing to 500, a vacuum due every `relay.vacuumLeasesEvery` =
 * 2,000 released leases), with the policy's `horizonVacuums` (as shipped: the horizon read before each vacuum,
 * skipped while it has not moved) against without it (`null`: a vacuum every 2,000 leases), in turns; once with a
 * second connection holding `begin isolation level repeatable read; select 1` through the drain, once without.
 * Per drain: the vacuums (`pg_stat_user_tables.vacuum_count`), the horizon reads, the shared buffers the vacuums
 * hit or read (pg_stat_statements, on the embedded server, which preloads it), the buffers one more vacuum of the
 * table reads at the end (still under the hold: what each vacuum skipped would have read; from VACUUM VERBOSE's
 * "buffer usage", on any server), and the lease table's pages. Counts, not timings (no lock needed):
 * the machine's load changes only how many vacuums come due while another still runs (one at a time per relay).
 */
import 'reflect-metadata';
import { Client } from 'pg';
import { createBenchApp } from '../harness/bench-app';
import { consumerClass } from '../harness/bench-consumers';
import type { BenchDatabase } from '../harness/bench-database';
import { exitWhenDone, heading, inTurns, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const TURNS = Number(process.env.TURNS ?? 2);
const VARIANTS = ['horizon read first (as shipped)', 'every 2,000 leases (before)'] as const;
type Variant = (typeof VARIANTS)[number];
type Figure = 'vacuums' | 'horizon reads' | 'vacuum buffers' | 'one more vacuum' | 'pages';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track_utility': 'on',
  });
  try {
    const tracked = await db
      .sql('create extension if not exists pg_stat_statements')
      .then(() => db.sql('select pg_stat_statements_reset()'))
      .then(
        () => true,
        () => false,
      );
    // only the relay's own vacuums, not autovacuum's, which would come by at its own time
    await db.sql(`alter table public.outbox_event_leases set (autovacuum_enabled = false)`);
    heading(
      `The relay's lease vacuums: drain() of ${EVENTS.toLocaleString('en-US')} events × 2 consumers, ${TURNS} turns` +
        (tracked ? '' : ' (no pg_stat_statements on this server: no buffer figures)'),
      serverVersion,
    );
    for (const held of [true, false]) {
      const figures = await inTurns<Variant, Figure>(VARIANTS, TURNS, (variant) =>
        drain(db, variant, held, tracked),
      );
      print(`\n  ${held ? 'a snapshot held through the drain' : 'nothing held'}`);
      for (const [figure, runs] of figures)
        for (const variant of VARIANTS)
          print(`    ${figure.padEnd(15)} ${variant.padEnd(34)} ${runs.get(variant)!.join(' / ')}`);
    }
  } finally {
    await close();
  }
}

async function drain(
  db: BenchDatabase,
  variant: Variant,
  held: boolean,
  tracked: boolean,
): Promise<Record<Figure, number>> {
  await db.resetWithPendingEvents(EVENTS);
  // the lease table as a relay with no history finds it: empty, vacuumed
  await db.sql(`truncate public.outbox_event_leases`);
  const holder = new Client({ connectionString: db.url });
  await holder.connect();
  try {
    if (held) {
      await holder.query('begin isolation level repeatable read');
      await holder.query('select 1');
    }
    const before = await leaseTable(db);
    if (tracked) await db.sql('select pg_stat_statements_reset()');
    const app = await createBenchApp({
      url: db.url,
      consumers: [consumerClass('no-db')],
      policy: variant === 'every 2,000 leases (before)' ? { horizonVacuums: null } : {},
      probe: false,
    });
    try {
      await app.relay.drain();
    } finally {
      await app.close(); // waits for a vacuum still running
    }
    const after = await leaseTable(db);
    const statements = tracked ? await vacuumStatements(db) : { horizonReads: NaN, buffers: NaN };
    const oneMore = await vacuumBuffers(db.url);
    return {
      vacuums: after.vacuums - before.vacuums,
      'horizon reads': statements.horizonReads,
      'vacuum buffers': statements.buffers,
      'one more vacuum': oneMore,
      pages: after.pages,
    };
  } finally {
    await holder.end();
  }
}

/** The lease table's pages, and its vacuums by hand. */
async function leaseTable(db: BenchDatabase): Promise<{ pages: number; vacuums: number }> {
  const [row] = await db.sql<{ pages: number; vacuums: number }>(
    `select (pg_relation_size(relid) / current_setting('block_size')::int)::int as pages,
            vacuum_count::int as vacuums
       from pg_stat_user_tables where relid = 'public.outbox_event_leases'::regclass`,
  );
  return row!;
}

/** The shared buffers (hits and misses) one vacuum of the lease table reads, as VACUUM VERBOSE reports them. */
async function vacuumBuffers(url: string): Promise<number> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const notices: string[] = [];
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    await client.query(`set lc_messages = 'C'`).catch(() => undefined);
    await client.query('vacuum (verbose, skip_locked, truncate false) public.outbox_event_leases');
    const usage = /buffer usage: (\d+) hits, (\d+) (?:misses|reads)/.exec(notices.join('\n'));
    return usage ? Number(usage[1]) + Number(usage[2]) : Number.NaN;
  } finally {
    await client.end();
  }
}

/** The horizon reads, and the shared buffers the lease vacuums hit or read, since the last reset. */
async function vacuumStatements(db: BenchDatabase): Promise<{ horizonReads: number; buffers: number }> {
  const [row] = await db.sql<{ reads: string; buffers: string }>(
    `select coalesce(sum(calls) filter (where query like '%pg_stat_get_activity%'), 0)::text as reads,
            coalesce(sum(shared_blks_hit + shared_blks_read) filter (where query ilike 'vacuum%'), 0)::text as buffers
       from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`,
  );
  return { horizonReads: Number(row!.reads), buffers: Number(row!.buffers) };
}

exitWhenDone(main());
