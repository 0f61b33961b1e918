/**
 * 1. Enqueue cost. Business transactions (insert a contact) with and without an outbox event, through the Nest
 * app (TypeORM + `OutboxService.enqueue`) and through raw `pg`, at 1 and 8 connections: commits/s, commits per
 * WAL flush (group commit), and WAL bytes per enqueued event.
 *
 * Commits/s of 1 connection follow the WAL flush time, which drifts on a shared machine by more than the
 * differences measured here, over seconds. So every variant is open at once and they take turns in short
 * slices (forward, then backward), each one's time and commits added up: a drift lands on all of them alike.
 * Commits per flush cannot be split by slice (a session publishes its flush count when it ends): those come from
 * runs of their own, one variant at a time on fresh tables.
 */
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import {
  drive,
  ENQUEUE_APPLICATION_NAME as APPLICATION_NAME,
  openTransactor,
  type Driven,
  type Side,
  type Transactor,
  type Workload,
} from '../harness/enqueue-transactors';
import { inTurn, median } from '../harness/stats';

interface EnqueueFigures {
  commitsPerS: number;
  /** CPU time of this Node process (user + system) per commit: the client side's cost. */
  cpuUsPerCommit: number;
  /** NaN for the workloads whose flushes are not counted (without the event). */
  commitsPerFlush: number;
  statementsPerCommit: number;
}

const WARM_UP_MS = 300;
const CONNECTIONS = [1, 8] as const;

/** Each workload's commits/s and Node CPU per commit, measured in turns (see the file's comment). */
async function measureInTurns(
  context: BenchContext,
  workloads: readonly Workload[],
  connections: number,
): Promise<{ commitsPerS: number; cpuUsPerCommit: number }[]> {
  const { db, options } = context;
  await db.truncate();
  await db.checkpoint();
  const transactors: Transactor[] = [];
  try {
    for (const workload of workloads) transactors.push(await openTransactor(db.url, connections, workload));
    for (const transactor of transactors) {
      await drive(transactor, connections, WARM_UP_MS);
      transactor.statements();
    }
    const totals = workloads.map(() => ({ commits: 0, ms: 0, cpuUs: 0 }));
    const { enqueueSeconds, enqueueSliceMs } = options.sizes;
    const turns = Math.max(1, Math.round((enqueueSeconds * 1000) / enqueueSliceMs));
    const forward = workloads.map((_, i) => i);
    for (let turn = 0; turn < turns; turn++) {
      for (const i of inTurn(forward, turn)) {
        const slice = await drive(transactors[i]!, connections, enqueueSliceMs);
        transactors[i]!.statements(); // the probe's bookkeeping, outside the timed slices
        totals[i]!.commits += slice.commits;
        totals[i]!.ms += slice.ms;
        totals[i]!.cpuUs += slice.cpuUs;
      }
    }
    return totals.map((t) => ({
      commitsPerS: (t.commits / t.ms) * 1000,
      cpuUsPerCommit: t.cpuUs / t.commits,
    }));
  } finally {
    await Promise.all(transactors.map((t) => t.close()));
  }
}

/** Group commit and statements of one workload: a run of its own on fresh tables and fresh connections. */
interface FlushRun {
  commitsPerFlush: number;
  statementsPerCommit: number;
}

/**
 * Flushes are counted over the whole run, sessions closed so that their counters are published (a warm-up
 * first, counted too: it is the same load).
 */
async function measureFlushes(
  context: BenchContext,
  workload: Workload,
  connections: number,
): Promise<FlushRun> {
  const { db, flushes, options } = context;
  await db.truncate();
  await db.checkpoint();
  const flushesBefore = await flushes.read();
  const transactor = await openTransactor(db.url, connections, workload);
  let driven: Driven;
  let statements: number;
  try {
    driven = await drive(transactor, connections, WARM_UP_MS + options.sizes.enqueueFlushSeconds * 1000);
    statements = transactor.statements();
  } finally {
    await transactor.close();
  }
  await db.waitForSessionsToEnd(APPLICATION_NAME);
  const flushesAfter = await flushes.read();
  const flushCount =
    flushesBefore === null || flushesAfter === null ? Number.NaN : flushesAfter - flushesBefore;
  return {
    commitsPerFlush: flushCount > 0 ? driven.commits / flushCount : Number.NaN,
    statementsPerCommit: statements / driven.commits,
  };
}

/** WAL bytes per event when each transaction writes only the event: `enqueue` vs the hand-written INSERT. */
async function walPerEnqueuedEvent(context: BenchContext, side: Side): Promise<number> {
  const { db } = context;
  const count = context.options.sizes.enqueueWalTransactions;
  await db.truncate();
  await db.checkpoint();
  const transactor = await openTransactor(db.url, 1, { side, business: false, withEvent: true });
  try {
    await transactor.run(0); // first use opens the connection
    const walBefore = await db.walPosition();
    for (let i = 0; i < count; i++) await transactor.run(0);
    return (await db.walBytesSince(walBefore)) / count;
  } finally {
    await transactor.close();
  }
}

export const enqueueScenario: BenchScenario = {
  name: 'enqueue',
  title: 'Enqueue cost (goals: ≥ 0.90× raw commits/s and commits per WAL flush; WAL per event ≤ 1.10× raw)',
  async run(context) {
    const { report, options } = context;
    const variants: readonly (Workload & { key: string })[] = [
      { key: 'raw-plain', side: 'raw', business: true, withEvent: false },
      { key: 'library-plain', side: 'library', business: true, withEvent: false },
      { key: 'raw-outbox', side: 'raw', business: true, withEvent: true },
      { key: 'library-outbox', side: 'library', business: true, withEvent: true },
      // Diagnostic: the same with the library's cross-process wake-up NOTIFY off, to show what it costs.
      {
        key: 'library-outbox-quiet',
        side: 'library',
        business: true,
        withEvent: true,
        relay: { wakeUps: 'off' },
      },
    ];
    const figures = new Map<string, EnqueueFigures>();
    const withEvent = variants.filter((v) => v.withEvent);
    for (const connections of CONNECTIONS) {
      const inTurns = await measureInTurns(context, variants, connections);
      // group commit and statements: the workloads with the event, each in runs of its own, taking turns
      const flushRuns = new Map<string, FlushRun[]>();
      for (let repeat = 0; repeat < options.sizes.enqueueFlushRepeats; repeat++) {
        for (const v of inTurn(withEvent, repeat)) {
          flushRuns.set(v.key, [
            ...(flushRuns.get(v.key) ?? []),
            await measureFlushes(context, v, connections),
          ]);
        }
      }
      for (const [i, v] of variants.entries()) {
        const runs = flushRuns.get(v.key) ?? [];
        figures.set(`${v.key}@${connections}`, {
          ...inTurns[i]!,
          commitsPerFlush: runs.length > 0 ? median(runs.map((r) => r.commitsPerFlush)) : Number.NaN,
          statementsPerCommit: runs.length > 0 ? median(runs.map((r) => r.statementsPerCommit)) : Number.NaN,
        });
      }
    }
    const pick = (key: string, field: keyof EnqueueFigures): number =>
      figures.get(key)?.[field] ?? Number.NaN;
    for (const c of CONNECTIONS) {
      report.add({
        scenario: 'enqueue',
        label: `business tx only, ${c} conn: commits/s (TypeORM)`,
        value: pick(`library-plain@${c}`, 'commitsPerS'),
        unit: '/s',
        versus: { label: 'raw pg', value: pick(`raw-plain@${c}`, 'commitsPerS') },
      });
      report.add({
        scenario: 'enqueue',
        label: `business tx + enqueue, ${c} conn: commits/s`,
        value: pick(`library-outbox@${c}`, 'commitsPerS'),
        unit: '/s',
        versus: { label: 'raw', value: pick(`raw-outbox@${c}`, 'commitsPerS') },
        goal: { on: 'ratio', op: '>=', target: 0.9 },
      });
      report.add({
        scenario: 'enqueue',
        label: `business tx + enqueue, ${c} conn: commits per WAL flush`,
        value: pick(`library-outbox@${c}`, 'commitsPerFlush'),
        unit: '',
        versus: { label: 'raw', value: pick(`raw-outbox@${c}`, 'commitsPerFlush') },
        goal: { on: 'ratio', op: '>=', target: 0.9 },
      });
      report.add({
        scenario: 'enqueue',
        label: `business tx + enqueue, ${c} conn: statements per commit`,
        value: pick(`library-outbox@${c}`, 'statementsPerCommit'),
        unit: '',
        versus: { label: 'raw', value: pick(`raw-outbox@${c}`, 'statementsPerCommit') },
        note: 'begin, contact, event, commit — plus, for the library, any statement it sends outside the transaction (wake-up NOTIFY)',
      });
      report.add({
        scenario: 'enqueue',
        label: `business tx + enqueue, ${c} conn: Node CPU per commit`,
        value: pick(`library-outbox@${c}`, 'cpuUsPerCommit'),
        unit: 'µs',
        versus: { label: 'raw', value: pick(`raw-outbox@${c}`, 'cpuUsPerCommit') },
        note:
          `without the event: library ${pick(`library-plain@${c}`, 'cpuUsPerCommit').toFixed(0)} µs, ` +
          `raw ${pick(`raw-plain@${c}`, 'cpuUsPerCommit').toFixed(0)} µs (the bench process: app, TypeORM, pg client)`,
      });
      report.add({
        scenario: 'enqueue',
        label: `diagnostic: + enqueue with relay.wakeUps 'off', ${c} conn`,
        value: pick(`library-outbox-quiet@${c}`, 'commitsPerS'),
        unit: '/s',
        versus: { label: 'raw', value: pick(`raw-outbox@${c}`, 'commitsPerS') },
        note:
          `commits per WAL flush ${pick(`library-outbox-quiet@${c}`, 'commitsPerFlush').toFixed(2)}, ` +
          `Node CPU per commit ${pick(`library-outbox-quiet@${c}`, 'cpuUsPerCommit').toFixed(0)} µs: ` +
          'what enqueue costs without the wake-up NOTIFY',
      });
      report.add({
        scenario: 'enqueue',
        label: `library: with enqueue vs without, ${c} conn: commits/s`,
        value: pick(`library-outbox@${c}`, 'commitsPerS'),
        unit: '/s',
        versus: { label: 'without', value: pick(`library-plain@${c}`, 'commitsPerS') },
      });
    }
    const { enqueueSeconds, enqueueSliceMs, enqueueFlushSeconds, enqueueFlushRepeats } = options.sizes;
    report.note(
      `commits/s and CPU: all variants open at once, taking turns in ${enqueueSliceMs} ms slices for ` +
        `${enqueueSeconds} s each (forward, then backward); commits per flush and statements: median of ` +
        `${enqueueFlushRepeats} run(s) of ${enqueueFlushSeconds} s per variant with the event, on fresh tables`,
    );
    report.add({
      scenario: 'enqueue',
      label: 'WAL bytes per enqueued event (own transaction)',
      value: await walPerEnqueuedEvent(context, 'library'),
      unit: 'B',
      versus: { label: 'raw INSERT', value: await walPerEnqueuedEvent(context, 'raw') },
      goal: { on: 'ratio', op: '<=', target: 1.1 },
      note:
        `${options.sizes.enqueueWalTransactions} sequential transactions each, fresh tables after a checkpoint; ` +
        'includes each commit record',
    });
  },
};
