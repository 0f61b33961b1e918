/**
 * 4. Backlog scale. The time of one relay round (claim a batch, run two in-memory consumers, record) with a
 * small and with a large published history in the tables, to show the claim does not grow with history.
 * History is bulk-loaded in SQL: published events, each with delivered delivery rows and inbox rows.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT } from '../harness/bench-database';
import { CONSUMER_NAMES, InMemoryConsumers } from '../harness/bench-consumers';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import { addKinds, describeKinds, type QueryKindStats } from '../harness/query-probe';
import { median, now } from '../harness/stats';
import { runBatchedRound } from '../raw/batched-relay';
import { RawSession } from '../raw/raw-session';

const BATCH_SIZE = OUTBOX_DEFAULTS.relay.batchSize;
const WARM_UP_ROUNDS = 2;

/** Median time of `rounds` library rounds of one full batch each, and the slowest statement kinds. */
async function libraryRoundMs(
  context: BenchContext,
  rounds: number,
): Promise<{ ms: number; slowest: string }> {
  const { db } = context;
  await db.loadPendingEvents((rounds + WARM_UP_ROUNDS) * BATCH_SIZE);
  await db.sql('analyze');
  const app = await createBenchApp({
    url: db.url,
    consumers: [InMemoryConsumers],
    // one batch per round, of BATCH_SIZE, as the raw side's (two lanes would claim two per round; claims of
    // handlers that write nothing would grow)
    relay: { batchSize: BATCH_SIZE, maxBatchSize: BATCH_SIZE, concurrency: 1 },
  });
  try {
    const times: number[] = [];
    const kinds = new Map<string, QueryKindStats>();
    for (let i = 0; i < rounds + WARM_UP_ROUNDS; i++) {
      app.probe.take();
      const began = now();
      const result = await app.relay.runOnce();
      const ms = now() - began;
      const taken = app.probe.take();
      if (i >= WARM_UP_ROUNDS && result.eventsClaimed > 0) {
        times.push(ms);
        addKinds(kinds, taken.kinds);
      }
    }
    return { ms: median(times), slowest: describeKinds(kinds, times.length, 4).text };
  } finally {
    await app.close();
  }
}

/** Median time of `rounds` raw batched rounds of one full batch each. */
async function rawRoundMs(context: BenchContext, rounds: number): Promise<number> {
  const { db } = context;
  await db.loadPendingEvents((rounds + WARM_UP_ROUNDS) * BATCH_SIZE);
  await db.sql('analyze');
  const session = await RawSession.connect(db.url, 'bench-scale');
  const plan = { tenantId: BENCH_TENANT, batchSize: BATCH_SIZE, consumers: CONSUMER_NAMES['no-db'] };
  try {
    const times: number[] = [];
    for (let i = 0; i < rounds + WARM_UP_ROUNDS; i++) {
      const began = now();
      const relayed = await runBatchedRound(session, plan);
      if (i >= WARM_UP_ROUNDS && relayed > 0) times.push(now() - began);
    }
    return median(times);
  } finally {
    await session.end();
  }
}

export const backlogScaleScenario: BenchScenario = {
  name: 'scale',
  title: 'Backlog scale (goal: round time with the large history ≤ 1.5× that with the small one)',
  async run(context) {
    const { db, report, options } = context;
    const { scaleSmall, scaleLarge, scaleRounds } = options.sizes;
    await db.truncate();
    await db.checkpoint();
    const results = new Map<number, { library: number; raw: number }>();
    let loaded = 0;
    for (const size of [scaleSmall, scaleLarge]) {
      const began = now();
      await db.loadPublishedHistory(size - loaded, CONSUMER_NAMES['no-db']);
      loaded = size;
      await db.vacuumAnalyze();
      await db.checkpoint();
      const seconds = ((now() - began) / 1000).toFixed(1);
      report.note(
        `history of ${size.toLocaleString('en-US')} published events loaded, vacuumed and analyzed in ${seconds} s`,
      );
      const library = await libraryRoundMs(context, scaleRounds);
      const raw = await rawRoundMs(context, scaleRounds);
      results.set(size, { library: library.ms, raw });
      report.add({
        scenario: 'scale',
        label: `round of ${BATCH_SIZE} events with ${size.toLocaleString('en-US')} events of history`,
        value: library.ms,
        unit: 'ms',
        versus: { label: 'raw batched', value: raw },
        note: `library, mean per round of the slowest statements: ${library.slowest}`,
      });
    }
    const small = results.get(scaleSmall)!;
    const large = results.get(scaleLarge)!;
    const sizes = `${scaleLarge.toLocaleString('en-US')} vs ${scaleSmall.toLocaleString('en-US')} events of history`;
    report.add({
      scenario: 'scale',
      label: `library round time, ${sizes}`,
      value: large.library,
      unit: 'ms',
      versus: { label: 'small', value: small.library },
      goal: { on: 'ratio', op: '<=', target: 1.5 },
    });
    report.add({
      scenario: 'scale',
      label: `raw round time, ${sizes}`,
      value: large.raw,
      unit: 'ms',
      versus: { label: 'small', value: small.raw },
    });
    report.note(
      `median of ${scaleRounds} relay.runOnce() rounds (after ${WARM_UP_ROUNDS} warm-up rounds) over ` +
        `${((scaleRounds + WARM_UP_ROUNDS) * BATCH_SIZE).toLocaleString('en-US')} pending events; ` +
        'each history event has 2 delivered delivery rows and 2 inbox rows (so 1,000,000 events = 5,000,000 rows)',
    );
  },
};
