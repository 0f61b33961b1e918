/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/relay-statements.ts`
 *
 * What the relay's statements cost PostgreSQL, from `pg_stat_statements` (an embedded PostgreSQL started with it,
 * or DATABASE_URL on a server that preloads it): a drain of EVENTS (default 20,000) pending events, two
 * in-process consumers each, batches of 100, by the library (consumers without DB use, and one consumer writing a
 * row) and by the raw batched relay of the benchmark — calls, planning, execution and WAL per batch for each
 * statement. Then, in turns, designs against the shipped one: the lease table LOGGED instead of UNLOGGED
 * (ADR 0601), the relay policy's `namedStatements` off (ADR 0502; the option `preparedStatements`), and its
 * `unguardedClosings` off (ADR 0806): statements, planning and execution per batch, events per second. Figures of
 * ADRs 0601, 0602, 0604, 0502 and 0806.
 */
import 'reflect-metadata';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT } from '../harness/bench-database';
import {
  CONSUMER_NAMES,
  consumerClass,
  INSERT_EFFECT_SQL,
  type ConsumerVariant,
} from '../harness/bench-consumers';
import { now } from '../harness/stats';
import { drainBatched } from '../raw/batched-relay';
import { RawSession } from '../raw/raw-session';
import { compare, heading, inTurns, openDecisionDatabase, print } from './decision-server';
import type { BenchDatabase } from '../harness/bench-database';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const BATCH = 100;
const TURNS = Number(process.env.TURNS ?? 2);

/**
 * What a statement is, from its text: pg_stat_statements keeps the text with every constant replaced by a
 * parameter and the parameters numbered anew, so the labels look for parts no normalisation changes.
 */
const LABELS: readonly [(text: string) => boolean, string][] = [
  [(t) => t.includes('with fresh as'), 'fan-out (claim of new events, leases)'],
  [(t) => t.includes('with retry as'), 'claim of due deliveries'],
  [
    (t) => t.includes('with o as') && t.includes('pairs have no delivery ids'),
    'outcome of in-process pairs (fenced)',
  ],
  [(t) => t.includes('with o as'), 'outcome (general statement)'],
  [(t) => t.includes('outbox_due_tenants'), 'due-tenant scan'],
  [(t) => t.includes('outbox_consumer_instances'), 'registry heartbeat'],
  [(t) => t.includes('$outbox_guard$'), 'batch guard (do block)'],
  [(t) => t.includes(' as tenant'), 'handler context'],
  [
    (t) => t.includes('set_config(') || t.includes('plan_cache_mode'),
    'settings (contexts, bounds, plan mode)',
  ],
  [(t) => /^\s*(release )?savepoint/i.test(t), 'savepoints'],
  [(t) => /^\s*(begin|start transaction|commit|rollback)\b/i.test(t), 'begin / commit'],
  [(t) => t === INSERT_EFFECT_SQL, "handler's own insert"],
  [(t) => t.includes('from unnest($1::uuid[], $2::uuid[], $3::bigint[]) as ev'), 'raw relay: record'],
  [(t) => t.includes('for update skip locked'), 'raw relay: claim'],
];

interface StatementStats {
  label: string;
  calls: number;
  planMs: number;
  execMs: number;
  walBytes: number;
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track_planning': 'on',
    'pg_stat_statements.track_utility': 'on',
  });
  try {
    const [preload] = await db.sql<{ setting: string }>(
      `select current_setting('shared_preload_libraries') as setting`,
    );
    if (!preload!.setting.includes('pg_stat_statements'))
      throw new Error(
        'this server does not preload pg_stat_statements: unset DATABASE_URL to use an embedded one',
      );
    await db.sql('create extension if not exists pg_stat_statements');
    heading(
      `The relay's statements: ${EVENTS.toLocaleString('en-US')} events, 2 consumers, batches of ${BATCH}`,
      serverVersion,
    );
    for (const variant of ['no-db', 'db-write'] as const) {
      await db.resetWithPendingEvents(EVENTS);
      await resetStatements(db);
      await drainLibrary(db, variant);
      printStatements(
        `library, ${variant === 'no-db' ? 'consumers without DB' : 'one consumer writes a row'}`,
        await statements(db),
      );
    }
    await db.resetWithPendingEvents(EVENTS);
    await resetStatements(db);
    const raw = await RawSession.connect(db.url, 'decision-raw');
    try {
      await drainBatched(raw, {
        tenantId: BENCH_TENANT,
        batchSize: BATCH,
        consumers: CONSUMER_NAMES['no-db'],
      });
    } finally {
      await raw.end();
    }
    printStatements('raw batched relay, consumers without DB', await statements(db));

    print('\nThe lease table UNLOGGED (as shipped) against LOGGED, consumers without DB (ADR 0601)');
    const leases = await inTurns(['unlogged (as shipped)', 'logged'] as const, TURNS, async (mode) => {
      await db.sql(`alter table public.outbox_event_leases set ${mode === 'logged' ? 'logged' : 'unlogged'}`);
      await db.resetWithPendingEvents(EVENTS);
      const wal = await db.walPosition();
      const ms = await drainLibrary(db, 'no-db');
      return { wal: (await db.walBytesSince(wal)) / EVENTS, rate: (EVENTS / ms) * 1000 };
    });
    await db.sql('alter table public.outbox_event_leases set unlogged');
    compare('WAL bytes per relayed event', 'B', leases.get('wal')!);
    compare('events/s', '/s', leases.get('rate')!);

    print(
      "\nNamed statements with generic plans (as shipped) against the policy's namedStatements off (ADR 0502)",
    );
    await comparePolicies(db, {
      'named, generic plans (as shipped)': {},
      unnamed: { namedStatements: false },
    });
    print("\nClosings without the guard (as shipped) against the policy's unguardedClosings off (ADR 0806)");
    await comparePolicies(db, {
      'unguarded closings (as shipped)': {},
      'guarded closings': { unguardedClosings: false },
    });
  } finally {
    await close();
  }
}

/** Statements, planning and execution per batch of BATCH events, and events per second, of a drain. */
function totals(
  all: readonly StatementStats[],
  ms: number,
): Record<'calls' | 'plan' | 'exec' | 'rate', number> {
  const batches = EVENTS / BATCH;
  return {
    calls: all.reduce((sum, s) => sum + s.calls, 0) / batches,
    plan: all.reduce((sum, s) => sum + s.planMs, 0) / batches,
    exec: all.reduce((sum, s) => sum + s.execMs, 0) / batches,
    rate: (EVENTS / ms) * 1000,
  };
}

/** Drains with consumers without DB under each variant's policy switches, in turns: `totals` of each. */
async function comparePolicies<V extends string>(
  db: BenchDatabase,
  variants: Readonly<Record<V, Partial<RelayPolicy>>>,
): Promise<void> {
  const figures = await inTurns(Object.keys(variants) as V[], TURNS, async (variant) => {
    await db.resetWithPendingEvents(EVENTS);
    await resetStatements(db);
    const ms = await drainLibrary(db, 'no-db', variants[variant]);
    return totals(await statements(db), ms);
  });
  compare(`statements per batch of ${BATCH}`, '', figures.get('calls')!);
  compare('planning per batch, all statements', 'ms', figures.get('plan')!);
  compare('execution per batch, all statements', 'ms', figures.get('exec')!);
  compare('events/s', '/s', figures.get('rate')!);
}

/**
 * Drains the backlog with a fresh app (the registry was truncated with the events), with switches of the relay's
 * policy; returns the milliseconds. Claims stay at BATCH (no claim growth), so that figures per batch compare.
 */
async function drainLibrary(
  db: BenchDatabase,
  variant: ConsumerVariant,
  policy: Partial<RelayPolicy> = {},
): Promise<number> {
  const app = await createBenchApp({
    url: db.url,
    consumers: [consumerClass(variant)],
    relay: { batchSize: BATCH },
    policy: { claimGrowth: null, ...policy },
    probe: false,
    applicationName: 'decision-library',
  });
  try {
    const began = now();
    await app.relay.drain();
    const ms = now() - began;
    const [left] = await db.sql<{ n: number }>(
      `select count(*)::int as n from event_outbox where status <> 'published'`,
    );
    if (left!.n !== 0) throw new Error(`${left!.n} events were not published by the drain`);
    return ms;
  } finally {
    await app.close();
  }
}

async function resetStatements(db: BenchDatabase): Promise<void> {
  await db.sql('select pg_stat_statements_reset()');
}

/** This database's statements since the last reset, summed by label. */
async function statements(db: BenchDatabase): Promise<StatementStats[]> {
  const rows = await db.sql<{ query: string; calls: string; plan: number; exec: number; wal: string }>(
    `select query, calls::text, total_plan_time as plan, total_exec_time as exec, wal_bytes::text as wal
       from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`,
  );
  const byLabel = new Map<string, StatementStats>();
  for (const row of rows) {
    if (row.query.includes('pg_stat_statements') || row.query.includes('current_database()')) continue;
    const label =
      LABELS.find(([matches]) => matches(row.query))?.[1] ?? row.query.replace(/\s+/g, ' ').slice(0, 50);
    const entry = byLabel.get(label) ?? { label, calls: 0, planMs: 0, execMs: 0, walBytes: 0 };
    entry.calls += Number(row.calls);
    entry.planMs += row.plan;
    entry.execMs += row.exec;
    entry.walBytes += Number(row.wal);
    byLabel.set(label, entry);
  }
  return [...byLabel.values()].sort((a, b) => b.execMs + b.planMs - (a.execMs + a.planMs));
}

function printStatements(title: string, rows: readonly StatementStats[]): void {
  const batches = EVENTS / BATCH;
  print(`\n${title}: per batch of ${BATCH} (${batches} batches)`);
  print(
    `  ${'statement'.padEnd(40)} ${'calls'.padStart(7)} ${'plan ms'.padStart(8)} ${'exec ms'.padStart(8)} ${'WAL kB'.padStart(8)}`,
  );
  let plan = 0;
  let exec = 0;
  for (const s of rows) {
    plan += s.planMs;
    exec += s.execMs;
    if (s.calls < batches / 10 && s.execMs / batches < 0.01) continue;
    print(
      `  ${s.label.slice(0, 40).padEnd(40)} ${(s.calls / batches).toFixed(2).padStart(7)} ${(s.planMs / batches).toFixed(3).padStart(8)} ` +
        `${(s.execMs / batches).toFixed(3).padStart(8)} ${(s.walBytes / batches / 1024).toFixed(1).padStart(8)}`,
    );
  }
  print(
    `  ${'all'.padEnd(40)} ${''.padStart(7)} ${(plan / batches).toFixed(3).padStart(8)} ${(exec / batches).toFixed(3).padStart(8)}`,
  );
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
