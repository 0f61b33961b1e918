/**
 * Deterministic figures: database round trips per claimed batch (and the statements they carry, counted at
 * the driver) at several batch sizes, and where a round's time goes (per statement kind, and
 * outside SQL), against the raw batched relay and the reference per-event pattern.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT } from '../harness/bench-database';
import { CONSUMER_NAMES, consumerClass, type ConsumerVariant } from '../harness/bench-consumers';
import type { BenchContext, BenchScenario } from '../harness/bench-scenario';
import {
  addKinds,
  describeKinds,
  PER_EVENTS_KINDS,
  TIME_BASED_KINDS,
  type QueryKindStats,
} from '../harness/query-probe';
import { mean, now } from '../harness/stats';
import { runBatchedRound, type RawRelayPlan } from '../raw/batched-relay';
import { runPerEventRound } from '../raw/per-event-relay';
import { RawSession } from '../raw/raw-session';

/**
 * Per claimed batch: mean statements (besides time-based ones) and wall time; statement kinds summed over all
 * `batches`.
 */
interface BatchProfile {
  /** Mean round trips per batch (besides time-based ones). */
  queries: number;
  /** Mean statements per batch, the same ones (library only: the raw baseline counts round trips). */
  statements: number;
  /** Mean time-based statements per round (library only; see TIME_BASED_KINDS). */
  timeBased: number;
  /** Statements sent per so many events over the whole drain (library only; see PER_EVENTS_KINDS). */
  perEvents: number;
  ms: number;
  kinds: Map<string, QueryKindStats>;
  batches: number;
}

async function profileLibrary(
  context: BenchContext,
  batchSize: number,
  variant: ConsumerVariant,
): Promise<BatchProfile> {
  const { db, options } = context;
  await db.resetWithPendingEvents(batchSize * options.sizes.roundTripBatches);
  const app = await createBenchApp({
    url: db.url,
    consumers: [consumerClass(variant)],
    // one batch per round, of batchSize: the figures are per claimed batch (two lanes would claim two per
    // round; claims of handlers that write nothing would grow)
    relay: { batchSize, maxBatchSize: batchSize, concurrency: 1 },
  });
  const queries: number[] = [];
  const statements: number[] = [];
  const timeBased: number[] = [];
  const perEvents: number[] = [];
  const times: number[] = [];
  const kinds = new Map<string, QueryKindStats>();
  try {
    for (;;) {
      app.probe.take();
      const began = now();
      const result = await app.relay.runOnce();
      const ms = now() - began;
      const taken = app.probe.take();
      if (result.eventsClaimed === 0) break;
      let clocked = 0;
      let maintenance = 0;
      let aside = 0;
      for (const [kind, stats] of taken.kinds) {
        if (TIME_BASED_KINDS.has(kind)) clocked += stats.count;
        if (PER_EVENTS_KINDS.has(kind)) maintenance += stats.count;
        if (TIME_BASED_KINDS.has(kind) || PER_EVENTS_KINDS.has(kind)) aside += stats.statements ?? 0;
      }
      queries.push(taken.total - clocked - maintenance);
      statements.push(taken.statements - aside);
      timeBased.push(clocked);
      perEvents.push(maintenance);
      times.push(ms);
      addKinds(kinds, taken.kinds);
    }
  } finally {
    await app.close();
  }
  return {
    queries: mean(queries),
    statements: mean(statements),
    timeBased: mean(timeBased),
    perEvents: perEvents.reduce((a, b) => a + b, 0),
    ms: mean(times),
    kinds,
    batches: queries.length,
  };
}

async function profileRaw(
  context: BenchContext,
  batchSize: number,
  variant: ConsumerVariant,
  pattern: 'batched' | 'per-event',
): Promise<BatchProfile> {
  const { db, options } = context;
  await db.resetWithPendingEvents(batchSize * options.sizes.roundTripBatches);
  const session = await RawSession.connect(db.url, 'bench-round-trips');
  const plan: RawRelayPlan = { tenantId: BENCH_TENANT, batchSize, consumers: CONSUMER_NAMES[variant] };
  const queries: number[] = [];
  const times: number[] = [];
  try {
    for (;;) {
      const before = session.queries;
      const began = now();
      const relayed =
        pattern === 'batched' ? await runBatchedRound(session, plan) : await runPerEventRound(session, plan);
      if (relayed === 0) break;
      times.push(now() - began);
      queries.push(session.queries - before);
    }
  } finally {
    await session.end();
  }
  return {
    queries: mean(queries),
    statements: mean(queries),
    timeBased: 0,
    perEvents: 0,
    ms: mean(times),
    kinds: new Map(),
    batches: queries.length,
  };
}

/** Where a library round's time goes: each statement kind, slowest first, and the time outside SQL. */
function timeSplit(profile: BatchProfile): string {
  const { sqlMs, text } = describeKinds(profile.kinds, profile.batches);
  const outside = (profile.ms - sqlMs).toFixed(2);
  return (
    `${profile.ms.toFixed(2)} ms per round = SQL ${sqlMs.toFixed(2)} ms [${text}] ` +
    `+ outside SQL ${outside} ms (handlers, TypeORM, mapping, event loop)`
  );
}

export const roundTripsScenario: BenchScenario = {
  name: 'round-trips',
  title:
    'Round trips per claimed batch and time split (goal: a constant, independent of batch size, without DB use)',
  async run(context) {
    const { report, options } = context;
    const sizes = options.sizes.roundTripBatchSizes;
    const library = new Map<number, BatchProfile>();
    for (const batchSize of sizes) {
      const lib = await profileLibrary(context, batchSize, 'no-db');
      const raw = await profileRaw(context, batchSize, 'no-db', 'batched');
      library.set(batchSize, lib);
      report.add({
        scenario: 'round-trips',
        label: `round trips per batch of ${batchSize}, consumers without DB`,
        value: lib.queries,
        unit: '',
        versus: { label: 'raw batched', value: raw.queries },
        note:
          `library: ${lib.statements.toFixed(2)} statements in them; besides these: ${lib.timeBased.toFixed(2)} time-based statements per round (${[...TIME_BASED_KINDS].join(', ')}), ` +
          `and ${lib.perEvents} statement(s) over the ${lib.batches * batchSize} events for ${[...PER_EVENTS_KINDS].join(', ')} ` +
          `(two per relay.vacuumLeasesEvery = ${OUTBOX_DEFAULTS.relay.vacuumLeasesEvery} events, the horizon's read and the vacuum; the first with a permission check)`,
      });
      report.add({
        scenario: 'round-trips',
        label: `time per round of ${batchSize}, consumers without DB`,
        value: lib.ms,
        unit: 'ms',
        versus: { label: 'raw batched', value: raw.ms },
        note: `library: ${timeSplit(lib)}`,
      });
    }
    const smallest = Math.min(...sizes);
    const largest = Math.max(...sizes);
    report.add({
      scenario: 'round-trips',
      label: `round trips per batch, ${largest} vs ${smallest} events`,
      value: library.get(largest)!.queries,
      unit: '',
      versus: { label: `batch ${smallest}`, value: library.get(smallest)!.queries },
      goal: { on: 'ratio', op: '<=', target: 1 },
    });
    const writing = await profileLibrary(context, 100, 'db-write');
    const rawWriting = await profileRaw(context, 100, 'db-write', 'batched');
    report.add({
      scenario: 'round-trips',
      label: 'round trips per batch of 100, one consumer writes a row',
      value: writing.queries,
      unit: '',
      versus: { label: 'raw batched', value: rawWriting.queries },
      note: `library: ${writing.statements.toFixed(2)} statements in them; ${timeSplit(writing)}`,
    });
    const reference = await profileRaw(context, 100, 'no-db', 'per-event');
    report.add({
      scenario: 'round-trips',
      label: 'round trips per batch of 100, reference per-event pattern',
      value: reference.queries,
      unit: '',
      versus: { label: 'library', value: library.get(100)?.queries ?? Number.NaN },
    });
  },
};
