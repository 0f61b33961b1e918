/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/drain-plans.ts`
 *
 * Where PostgreSQL's time goes in the no-op drain's two statements — the lean claim and the fenced outcome of
 * in-process pairs — as the relay runs them (generic plans, batches side by side), not as a script replays them:
 * drains of EVENTS (default 20,000) pending events, two no-op consumers, batches of 100, on an embedded PostgreSQL
 * with `pg_stat_statements`: events per second, Node and PostgreSQL CPU per event, and each statement's execution
 * and shared buffers per call. In TURNS (default 2) turns, the relay's sessions as shipped against
 * `enable_seqscan = off` (PGOPTIONS, every relay statement): what the generic plan's sequential scan of the lease
 * table in the claim's lease probe (`notLeased`) costs. With PLANS (a file), `auto_explain` too (analyze, buffers,
 * nested statements: the functions the statements call), and the plans of the calls slower than PLAN_MS (default
 * 3) are copied there; its timing of every node inflates the CPU figures. Figures of ADR 0804's addendum on issue 35.
 */
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { createBenchApp } from '../harness/bench-app';
import { consumerClass } from '../harness/bench-consumers';
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
/** Where the plans go; unset, no auto_explain (its timing of every node would inflate the CPU figures). */
const PLANS = process.env.PLANS;
const PLAN_MS = process.env.PLAN_MS ?? '3';

const STATEMENTS = [
  ['with fresh as', 'lean claim'],
  ['pairs have no delivery ids', 'outcome of pairs'],
] as const;

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase(
    PLANS === undefined
      ? { shared_preload_libraries: 'pg_stat_statements' }
      : {
          shared_preload_libraries: 'pg_stat_statements,auto_explain',
          'auto_explain.log_min_duration': PLAN_MS,
          'auto_explain.log_analyze': 'on',
          'auto_explain.log_buffers': 'on',
          'auto_explain.log_nested_statements': 'on',
        },
  );
  try {
    await db.sql('create extension if not exists pg_stat_statements');
    heading(
      `Drain plans: ${EVENTS.toLocaleString('en-US')} events, 2 no-op consumers, batches of 100`,
      serverVersion,
    );
    const figures = await inTurns(['as shipped', 'enable_seqscan off'] as const, TURNS, async (variant) => {
      await db.resetWithPendingEvents(EVENTS);
      await db.sql('select pg_stat_statements_reset()');
      const drained = await drain(db, variant === 'as shipped' ? undefined : '-c enable_seqscan=off');
      return { ...drained, ...(await perCall(db)) };
    });
    for (const [figure, runs] of figures) compare(figure, '', runs);
    if (PLANS !== undefined) {
      const [dir] = await db.sql<{ d: string }>(`select current_setting('data_directory') as d`);
      // the embedded server's log, in its data folder, goes with it: the plans are copied first
      execFileSync('sh', ['-c', `cat "${dir!.d}"/*.log > "${PLANS}" 2>/dev/null || true`]);
      print(`\nplans of the calls slower than ${PLAN_MS} ms: ${PLANS}`);
    }
  } finally {
    await close();
  }
}

/**
 * Drains with the relay's sessions started with `options` (PGOPTIONS, read by pg when it connects): events per
 * second, Node and PostgreSQL CPU per event (see `drainFigures`).
 */
async function drain(db: BenchDatabase, options: string | undefined): Promise<Record<string, number>> {
  if (options === undefined) delete process.env.PGOPTIONS;
  else process.env.PGOPTIONS = options;
  const app = await createBenchApp({
    url: db.url,
    consumers: [consumerClass('no-db')],
    relay: { batchSize: 100 },
    policy: { claimGrowth: null },
    probe: false,
    applicationName: 'decision-library',
  });
  try {
    return await drainFigures(app, db, 'decision-library', EVENTS);
  } finally {
    await app.close();
    delete process.env.PGOPTIONS;
  }
}

/** Execution ms and shared buffers per call of the claim and the outcome, from pg_stat_statements. */
async function perCall(db: BenchDatabase): Promise<Record<string, number>> {
  const rows = await db.sql<{ query: string; calls: string; exec: number; hit: string }>(
    `select query, calls::text, total_exec_time as exec, shared_blks_hit::text as hit from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())`,
  );
  const out: Record<string, number> = {};
  for (const [marker, label] of STATEMENTS) {
    // every text of the statement (the relay's sessions each prepare it; a warm-up runs it on nothing)
    const matching = rows.filter((r) => r.query.includes(marker));
    const calls = matching.reduce((sum, r) => sum + Number(r.calls), 0);
    if (calls === 0) continue;
    out[`${label}: ms per call`] = matching.reduce((sum, r) => sum + r.exec, 0) / calls;
    out[`${label}: buffers per call`] = matching.reduce((sum, r) => sum + Number(r.hit), 0) / calls;
  }
  return out;
}

exitWhenDone(main());
