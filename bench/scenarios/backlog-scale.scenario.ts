/**
 * 4. Backlog scale. The time of one relay round (claim a batch, run two in-memory consumers, record) with a
 * small and with a large published history in the tables (10 thousand against 1 and 10 million events), to show
 * the claim does not grow with history. The small history is in a second database, its rounds taken in turns with
 * the large one's, so that a busy machine slows both alike. History is bulk-loaded in SQL (one statement per
 * table, indexes built afterwards): published events, each with delivered delivery rows and inbox rows.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { createBenchApp, type BenchApp } from '../harness/bench-app';
import { BENCH_TENANT, BenchDatabase } from '../harness/bench-database';
import { CONSUMER_NAMES, InMemoryConsumers } from '../harness/bench-consumers';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import { addKinds, describeKinds, type QueryKindStats } from '../harness/query-probe';
import { median, now } from '../harness/stats';
import { runBatchedRound } from '../raw/batched-relay';
import { RawSession } from '../raw/raw-session';

const BATCH_SIZE = OUTBOX_DEFAULTS.relay.batchSize;
const WARM_UP_ROUNDS = 2;
/** History from which the round is held to "flat" (issue 37) instead of ≤ 1.5× the small history's. */
const FLAT_FROM = 10_000_000;

/** Median round time on each database, and (library) the slowest statement kinds. */
interface Rounds {
  ms: number;
  slowest: string;
}

/** Loads the pending events `rounds` rounds of one full batch claim, after the warm-up, in each database. */
async function loadRounds(dbs: readonly BenchDatabase[], rounds: number): Promise<void> {
  for (const db of dbs) {
    await db.loadPendingEvents((rounds + WARM_UP_ROUNDS) * BATCH_SIZE);
    await db.sql('analyze');
  }
}

/**
 * Median time of `rounds` library rounds of one full batch each, on every database in `dbs`, taken in turns
 * (round i on each before round i + 1): the databases see the same machine, however busy it is.
 */
async function libraryRoundsInTurns(dbs: readonly BenchDatabase[], rounds: number): Promise<Rounds[]> {
  await loadRounds(dbs, rounds);
  const apps: BenchApp[] = [];
  try {
    for (const db of dbs)
      apps.push(
        await createBenchApp({
          url: db.url,
          consumers: [InMemoryConsumers],
          // one batch per round, of BATCH_SIZE, as the raw side's (two lanes would claim two per round; claims of
          // handlers that write nothing would grow)
          relay: { batchSize: BATCH_SIZE, maxBatchSize: BATCH_SIZE, concurrency: 1 },
        }),
      );
    const times = apps.map((): number[] => []);
    const kinds = apps.map(() => new Map<string, QueryKindStats>());
    for (let i = 0; i < rounds + WARM_UP_ROUNDS; i++) {
      for (const [d, app] of apps.entries()) {
        app.probe.take();
        const began = now();
        const result = await app.relay.runOnce();
        const ms = now() - began;
        const taken = app.probe.take();
        if (i >= WARM_UP_ROUNDS && result.eventsClaimed > 0) {
          times[d]!.push(ms);
          addKinds(kinds[d]!, taken.kinds);
        }
      }
    }
    return times.map((t, d) => ({ ms: median(t), slowest: describeKinds(kinds[d]!, t.length, 4).text }));
  } finally {
    for (const app of apps) await app.close();
  }
}

/** Median time of `rounds` raw batched rounds of one full batch each, on every database, in turns. */
async function rawRoundsInTurns(dbs: readonly BenchDatabase[], rounds: number): Promise<number[]> {
  await loadRounds(dbs, rounds);
  const sessions: RawSession[] = [];
  const plan = { tenantId: BENCH_TENANT, batchSize: BATCH_SIZE, consumers: CONSUMER_NAMES['no-db'] };
  try {
    for (const db of dbs) sessions.push(await RawSession.connect(db.url, 'bench-scale'));
    const times = sessions.map((): number[] => []);
    for (let i = 0; i < rounds + WARM_UP_ROUNDS; i++) {
      for (const [d, session] of sessions.entries()) {
        const began = now();
        const relayed = await runBatchedRound(session, plan);
        if (i >= WARM_UP_ROUNDS && relayed > 0) times[d]!.push(now() - began);
      }
    }
    return times.map(median);
  } finally {
    for (const session of sessions) await session.end();
  }
}

/** Loads `count` more events of history, vacuums, analyzes and checkpoints; says how long and how big. */
async function loadHistory(
  context: BenchContext,
  db: BenchDatabase,
  count: number,
  total: number,
): Promise<void> {
  const began = now();
  await db.loadPublishedHistory(count, CONSUMER_NAMES['no-db']);
  const loadedS = ((now() - began) / 1000).toFixed(1);
  await db.vacuumAnalyze();
  await db.checkpoint();
  const seconds = ((now() - began) / 1000).toFixed(1);
  const gib = ((await db.outboxBytes()) / 2 ** 30).toFixed(2);
  context.report.note(
    `history of ${total.toLocaleString('en-US')} published events in ${db.name}: loaded (indexes rebuilt) in ` +
      `${loadedS} s, vacuumed and analyzed by ${seconds} s; outbox tables + indexes ${gib} GiB`,
  );
}

export const backlogScaleScenario: BenchScenario = {
  name: 'scale',
  title:
    'Backlog scale (goal: round time with a large history ≤ 1.5× that with the small one; from 10M events, ≤ 1.2×)',
  async run(context) {
    const { db, report, options } = context;
    const [smallSize, ...largeSizes] = options.sizes.scaleHistories;
    const rounds = options.sizes.scaleRounds;
    const small = await BenchDatabase.create(db.url, options.layout);
    try {
      await db.truncate();
      await db.checkpoint();
      let loaded = 0;
      for (const size of largeSizes) {
        await loadHistory(context, db, size - loaded, size);
        loaded = size;
        // the small history afresh each time: the rounds leave their events behind
        await small.truncate();
        await loadHistory(context, small, smallSize!, smallSize!);
        const [smallLibrary, largeLibrary] = await libraryRoundsInTurns([small, db], rounds);
        const [smallRaw, largeRaw] = await rawRoundsInTurns([small, db], rounds);
        const sizes = `${size.toLocaleString('en-US')} vs ${smallSize!.toLocaleString('en-US')} events of history`;
        for (const [history, library, raw] of [
          [smallSize!, smallLibrary!, smallRaw!],
          [size, largeLibrary!, largeRaw!],
        ] as const)
          report.add({
            scenario: 'scale',
            label: `round of ${BATCH_SIZE} events with ${history.toLocaleString('en-US')} events of history`,
            value: library.ms,
            unit: 'ms',
            versus: { label: 'raw batched', value: raw },
            note: `library, mean per round of the slowest statements: ${library.slowest}`,
          });
        report.add({
          scenario: 'scale',
          label: `library round time, ${sizes}`,
          value: largeLibrary!.ms,
          unit: 'ms',
          versus: { label: 'small', value: smallLibrary!.ms },
          goal: { on: 'ratio', op: '<=', target: size >= FLAT_FROM ? 1.2 : 1.5 },
        });
        report.add({
          scenario: 'scale',
          label: `raw round time, ${sizes}`,
          value: largeRaw!,
          unit: 'ms',
          versus: { label: 'small', value: smallRaw! },
        });
      }
    } finally {
      await small.drop();
    }
    report.note(
      `median of ${rounds} relay.runOnce() rounds (after ${WARM_UP_ROUNDS} warm-up rounds) over ` +
        `${((rounds + WARM_UP_ROUNDS) * BATCH_SIZE).toLocaleString('en-US')} pending events, on a database with the ` +
        'small history and one with the large in turns, round by round (the same machine load for both); each ' +
        'history event has 2 delivered delivery rows and 2 inbox rows (so 1,000,000 events = 5,000,000 rows)',
    );
  },
};
