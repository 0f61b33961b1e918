/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-cpu.ts`
 *
 * Where `enqueue`'s CPU goes against the hand-written insert (issue 35, ADR 1004): the peers scenario's enqueue
 * work — TypeORM's `transaction()`, a contact through the manager, then the event — at 1 and 8 connections, every
 * variant's app open at once, taking turns in slices of SLICE_MS (default 250 ms), SLICES per variant (default 24),
 * shown as the means of 4 groups of consecutive slices (ratios to the first variant, the peers scenario's raw line):
 * - the hand-written insert through the manager (TypeORM's `query()`, unnamed), the raw line of the peers scenario;
 * - the library as shipped (its defaults: the named insert, a paced wake-up, carried by an insert per gap);
 * - the library with `relay.wakeUps: 'off'` (what the wake-up costs);
 * - the library with its pacer's gap forced to 1 s (`wakeUpGapMs`: the wake-up's bookkeeping on every commit, a
 *   carrier and a timer once a second or so: what the pacer's per-gap work costs);
 * - the hand-written insert as a named statement on the runner's `pg` client (the floor of enqueue's query path);
 * - the hand-written insert through the manager of the library's app (its DataSource, pool and commit subscriber);
 * - the library's app and the plain DataSource with no event (the business transaction alone: the apps' share);
 * - pg-transactional-outbox's call (the rate to reach).
 * Per commit: the rate, Node CPU (this process, `process.cpuUsage`), the server's CPU (/proc: the server must run on
 * this machine — embedded when DATABASE_URL is unset), statements (pg_stat_statements, loaded on the embedded
 * server; the library's beyond 4 are its wake-up NOTIFYs) and the event loop's turns (libuv's count). Node CPU,
 * both CPUs and the turns are also read against the raw line turn by turn (`pairedDifference`: the median of the
 * turns' differences and its IQR). Then, untimed, COUNT_MS (default 1,000) of each variant with the process's
 * timers counted: armed, fired and cleared per commit.
 *
 * Before that, two deterministic figures of Node CPU alone, CALLS (default 100,000) each: `enqueue`'s own work with
 * its I/O stubbed (checks, id, statement, the named insert's path, the wake-up's bookkeeping), and one wake-up NOTIFY
 * sent alone, through a TypeORM QueryRunner (as before ADR 1004) and straight through the pool (as shipped).
 */
import 'reflect-metadata';
import type { RowsQuery } from '../harness/backend-cpu';
import { createBenchApp } from '../harness/bench-app';
import {
  contactEvent,
  drive,
  libraryTransactor,
  peerTransactor,
  rawInsertTransactor,
  stubbedRunner,
  typeormTransactor,
  type Transactor,
} from '../harness/enqueue-transactors';
import { StatementStats } from '../harness/statement-stats';
import { pgTransactionalOutboxPeer } from '../peers/pg-transactional-outbox.peer';
import { OutboxStore } from '../../libs/outbox/src/store/outbox.store';
import { notifyWakeup, outboxNames } from '../../libs/outbox/src/store/sql';
import { BENCH_TENANT } from '../harness/bench-database';
import {
  compare,
  compareEnqueue,
  comparePaired,
  enqueueSlice,
  heading,
  inGroups,
  inTurns,
  openDecisionDatabase,
  print,
} from './decision-server';

const SLICE_MS = Number(process.env.SLICE_MS ?? 250);
const SLICES = Number(process.env.SLICES ?? 24);
const CALLS = Number(process.env.CALLS ?? 100_000);
const COUNT_MS = Number(process.env.COUNT_MS ?? 1000);

/** Each variant's transactions, on connections named after it (ratios and paired differences are to the first). */
const OPENERS: Record<string, (url: string, connections: number, name: string) => Promise<Transactor>> = {
  'raw insert through the manager': (url, connections, name) => rawInsertTransactor(url, connections, name),
  'library (as shipped)': (url, connections, name) =>
    libraryTransactor(url, connections, LIBRARY, name, false),
  "library, wakeUps 'off'": (url, connections, name) =>
    libraryTransactor(url, connections, { ...LIBRARY, relay: { wakeUps: 'off' } }, name, false),
  'library, wake-up gap 1 s': (url, connections, name) =>
    libraryTransactor(url, connections, { ...LIBRARY, policy: { wakeUpGapMs: 1000 } }, name, false),
  'raw insert, named, on the pg client': (url, connections, name) =>
    rawInsertTransactor(url, connections, name, true),
  "raw insert on the library's app": (url, connections, name) =>
    libraryTransactor(url, connections, { ...LIBRARY, handWritten: true }, name, false),
  "library's app, no event": (url, connections, name) =>
    libraryTransactor(url, connections, { ...LIBRARY, withEvent: false }, name, false),
  'plain DataSource, no event': (url, connections, name) =>
    typeormTransactor(url, connections, name, () => Promise.resolve()),
  'pg-transactional-outbox': (url, connections, name) =>
    peerTransactor(url, connections, pgTransactionalOutboxPeer, name),
};
const LIBRARY = { side: 'library', business: true, withEvent: true } as const;
const VARIANTS = Object.keys(OPENERS);

function applicationName(variant: string): string {
  return `decision-enqueue-cpu-${VARIANTS.indexOf(variant)}`;
}

/** Node CPU per call of `work`, in µs, over `calls` calls one after another (after a tenth as many to warm up). */
async function cpuPerCall(calls: number, work: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < calls / 10; i++) await work(i);
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) await work(i);
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / calls;
}

/**
 * `enqueue`'s own Node CPU, its I/O stubbed: a runner whose `pg` client answers at once, so what is left is the
 * library's work per call. And a wake-up NOTIFY alone, both ways, on an idle pool. Three turns each.
 */
async function nodeAlone(url: string): Promise<void> {
  const app = await createBenchApp({
    url,
    consumers: [],
    probe: false,
    applicationName: 'decision-enqueue-alone',
  });
  try {
    const runner = stubbedRunner(app.dataSource) as never;
    const events = Array.from({ length: 1000 }, () => contactEvent().event);
    const store = app.context.get(OutboxStore);
    const wakeUp = notifyWakeup(outboxNames(), [BENCH_TENANT]);
    const figures = await inTurns(
      ['enqueue, I/O stubbed', 'NOTIFY through a QueryRunner', 'NOTIFY through the pool'],
      3,
      async (variant) => {
        if (variant === 'enqueue, I/O stubbed')
          return { cpu: await cpuPerCall(CALLS, (i) => app.outbox.enqueue(runner, events[i % 1000]!)) };
        const calls = CALLS / 20;
        if (variant === 'NOTIFY through a QueryRunner')
          return { cpu: await cpuPerCall(calls, () => store.query(wakeUp)) };
        return { cpu: await cpuPerCall(calls, () => store.notify(wakeUp)) };
      },
    );
    compare('Node CPU per call, alone', 'µs', figures.get('cpu')!);
  } finally {
    await app.close();
  }
}

/**
 * Timers armed (`setTimeout`), fired and cleared per commit over COUNT_MS of `transactor`'s transactions: every
 * timer of the process, counted by wrapping the global functions for the pass (not timed: the wrappers cost).
 */
async function timersPerCommit(
  transactor: Transactor,
  connections: number,
): Promise<Record<'armed' | 'fired' | 'cleared', number>> {
  const counts = { armed: 0, fired: 0, cleared: 0 };
  const { setTimeout: arm, clearTimeout: clear } = globalThis;
  globalThis.setTimeout = ((callback: (...args: unknown[]) => void, delay?: number, ...args: unknown[]) => {
    counts.armed++;
    return arm(
      (...passed: unknown[]) => {
        counts.fired++;
        callback(...passed);
      },
      delay,
      ...args,
    );
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((handle?: NodeJS.Timeout) => {
    if (handle) counts.cleared++;
    clear(handle);
  }) as typeof clearTimeout;
  try {
    const { commits } = await drive(transactor, connections, COUNT_MS);
    return {
      armed: counts.armed / commits,
      fired: counts.fired / commits,
      cleared: counts.cleared / commits,
    };
  } finally {
    globalThis.setTimeout = arm;
    globalThis.clearTimeout = clear;
  }
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track': 'none',
  });
  const stats = await StatementStats.enable(db);
  const query = db.sql.bind(db) as RowsQuery;
  await pgTransactionalOutboxPeer.uninstall(db);
  await pgTransactionalOutboxPeer.install(db);
  try {
    heading(
      `Business transaction + event through TypeORM, ${SLICES} slices of ${SLICE_MS} ms per variant`,
      serverVersion,
    );
    await nodeAlone(db.url);
    for (const connections of [1, 8]) {
      const apps = new Map<string, Transactor>();
      for (const variant of VARIANTS)
        apps.set(variant, await OPENERS[variant]!(db.url, connections, applicationName(variant)));
      try {
        await db.truncate();
        for (const app of apps.values()) await drive(app, connections, 300);
        const figures = await inTurns(VARIANTS, SLICES, (variant) =>
          enqueueSlice(apps.get(variant)!, connections, SLICE_MS, applicationName(variant), query, stats),
        );
        const label = `${connections} connection${connections > 1 ? 's' : ''}: `;
        compareEnqueue(label, figures);
        compare(`${label}event-loop turns per commit`, '', inGroups(figures.get('loopTurns')!));
        comparePaired(`${label}Node CPU per commit`, 'µs', figures.get('node')!);
        comparePaired(`${label}CPU per commit, Node + server`, 'µs', figures.get('total')!);
        comparePaired(`${label}event-loop turns per commit`, '', figures.get('loopTurns')!);
        comparePaired(`${label}events polled per commit`, '', figures.get('loopEvents')!);
        const timers = new Map<string, Map<string, number[]>>();
        for (const variant of VARIANTS)
          for (const [figure, value] of Object.entries(
            await timersPerCommit(apps.get(variant)!, connections),
          ))
            (timers.get(figure) ?? timers.set(figure, new Map()).get(figure)!).set(variant, [value]);
        for (const [figure, runs] of timers) compare(`${label}timers ${figure} per commit`, '', runs);
      } finally {
        for (const app of apps.values()) await app.close();
      }
    }
    print('  (the library against raw: CPU per commit ≤ 1.15×, Node CPU within 30 µs; commits/s ≥ the peer)');
  } finally {
    await pgTransactionalOutboxPeer.uninstall(db);
    await stats.disable();
    await close();
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
