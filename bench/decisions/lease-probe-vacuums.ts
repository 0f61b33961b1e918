/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/lease-probe-vacuums.ts`
 *
 * The lease table's vacuums against the claim's lease probe (issue 35, ADR 0601's and 0804's addenda): every
 * vacuum makes each connection plan its statements over the table anew, and the lean claim's probe of each
 * candidate event's lease (`notLeased`) is, in a plan made while the table was small, a sequential scan of it per
 * event, so every dead lease between two vacuums is read once per candidate. `drain()` of EVENTS (default 20,000)
 * pending events of one tenant, two consumers of each of KINDS (default `no-db,db-write-all`), batches of 100, on
 * an embedded PostgreSQL with `pg_stat_statements` (planning tracked), in TURNS (default 2) turns of the variants:
 * the claims planned as PostgreSQL likes (`RelayPolicy.leaseProbesByKey` off) or without sequential scans (the
 * lease probed by key in every plan, as shipped), a vacuum every 2,000 or every EVERY (default 20,000) released
 * leases (`relay.vacuumLeasesEvery`). Events per second, Node and
 * PostgreSQL CPU per event, the statements planned per 1,000 events and their planning time per event, the lean
 * claim's execution and buffers per call, and the vacuums run. VARIANTS (indexes, e.g. `0,3`) picks some.
 */
import 'reflect-metadata';
import { createBenchApp } from '../harness/bench-app';
import { consumerClass, type ConsumerVariant } from '../harness/bench-consumers';
import {
  openDecisionDatabase,
  inTurns,
  drainFigures,
  compare,
  heading,
  print,
  exitWhenDone,
} from './decision-server';
import type { BenchDatabase } from '../harness/bench-database';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const TURNS = Number(process.env.TURNS ?? 2);
const EVERY = Number(process.env.EVERY ?? 20_000);
const KINDS = (process.env.KINDS ?? 'no-db,db-write-all').split(',') as ConsumerVariant[];
const APP = 'decision-lease-probe';

interface Variant {
  byKey: boolean;
  vacuumLeasesEvery: number;
}

const ALL: Record<string, Variant> = {
  'scans allowed, every 2,000 (before)': { byKey: false, vacuumLeasesEvery: 2_000 },
  'by key, every 2,000': { byKey: true, vacuumLeasesEvery: 2_000 },
  [`scans allowed, every ${EVERY.toLocaleString('en-US')}`]: { byKey: false, vacuumLeasesEvery: EVERY },
  [`by key, every ${EVERY.toLocaleString('en-US')}`]: { byKey: true, vacuumLeasesEvery: EVERY },
};
const picked = process.env.VARIANTS?.split(',').map(Number);
const VARIANTS = Object.keys(ALL).filter((_, i) => picked === undefined || picked.includes(i));

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track_planning': 'on',
  });
  try {
    await db.sql('create extension if not exists pg_stat_statements');
    heading(
      `Lease probe and vacuums: drain() of ${EVENTS.toLocaleString('en-US')} events × 2 consumers, batches of 100`,
      serverVersion,
    );
    for (const kind of KINDS) {
      print(`\n${kind}`);
      const figures = await inTurns(VARIANTS, TURNS, (variant) => drain(db, kind, ALL[variant]!));
      for (const [figure, runs] of figures) compare(figure, '', runs);
    }
  } finally {
    await close();
  }
}

async function drain(
  db: BenchDatabase,
  kind: ConsumerVariant,
  variant: Variant,
): Promise<Record<string, number>> {
  await db.resetWithPendingEvents(EVENTS);
  const app = await createBenchApp({
    url: db.url,
    consumers: [consumerClass(kind)],
    relay: {
      enabled: false,
      batchSize: 100,
      vacuumLeasesEvery: variant.vacuumLeasesEvery,
    },
    policy: { leaseProbesByKey: variant.byKey },
    applicationName: APP,
    probe: false,
  });
  try {
    await db.sql('select pg_stat_statements_reset()');
    const vacuumsBefore = await vacuums(db);
    const figures = await drainFigures(app, db, APP, EVENTS);
    return { ...figures, ...(await statements(db)), vacuums: (await vacuums(db)) - vacuumsBefore };
  } finally {
    await app.close();
  }
}

async function vacuums(db: BenchDatabase): Promise<number> {
  const [row] = await db.sql<{ n: string }>(
    `select vacuum_count::text as n from pg_stat_user_tables where relname = 'outbox_event_leases'`,
  );
  return Number(row?.n ?? 0);
}

/** Plans per 1,000 events and planning µs per event (every statement), and the lean claim's figures per call. */
async function statements(db: BenchDatabase): Promise<Record<string, number>> {
  const rows = await db.sql<{
    query: string;
    calls: string;
    plans: string;
    plan: number;
    exec: number;
    hit: string;
  }>(
    `select query, calls::text, plans::text, total_plan_time as plan, total_exec_time as exec,
            shared_blks_hit::text as hit
       from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())
        and query not like '%pg_stat%'`,
  );
  const sum = (list: typeof rows, f: (r: (typeof rows)[number]) => number): number =>
    list.reduce((s, r) => s + f(r), 0);
  const claim = rows.filter((r) => r.query.includes('with fresh as') && r.query.includes('route_sets'));
  const claimCalls = sum(claim, (r) => Number(r.calls));
  return {
    'plans per 1,000 events': (sum(rows, (r) => Number(r.plans)) * 1000) / EVENTS,
    'planning µs/event': (sum(rows, (r) => r.plan) * 1000) / EVENTS,
    'lean claim plans': sum(claim, (r) => Number(r.plans)),
    'lean claim ms/call': sum(claim, (r) => r.exec) / claimCalls,
    'lean claim buffers/call': sum(claim, (r) => Number(r.hit)) / claimCalls,
  };
}

exitWhenDone(main());
