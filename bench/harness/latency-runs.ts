/**
 * Commit-to-handler latency runs: a producer committing at a steady rate, and the time each event's handler
 * started, on one monotonic clock. The raw NOTIFY-woken relay and the library (three wake-up paths) are measured
 * here; the latency and peers scenarios call them.
 */
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { createBenchApp, type BenchApp } from './bench-app';
import type { RowsQuery } from './backend-cpu';
import { CpuMeter } from './cpu-meter';
import { BENCH_EVENT, BENCH_TENANT } from './bench-database';
import { LatencyConsumer } from './bench-consumers';
import type { BenchContext } from './bench-scenario';
import { addKinds, type QueryKindStats } from './query-probe';
import { max, now, percentile, sleep, waitUntil } from './stats';
import { NOTIFY_RELAY_APPLICATION_NAMES, NotifyRelay, RAW_NOTIFY_CHANNEL } from '../raw/notify-relay';
import { insertContact, insertEvent, notify } from '../raw/raw.queries';
import { RawSession } from '../raw/raw-session';
import type { CpuProfile } from '../workers/relay-worker.protocol';

export interface LatencyRun {
  /** For the library: relay rounds run and their statements, from the app's query probe. */
  rounds?: string;
  /** Commit-to-handler time of each event handled, in ms. */
  latencies: number[];
  p50: number;
  p99: number;
  max: number;
  produced: number;
  missing: number;
  ratePerS: number;
  /**
   * CPU of the timed part (after the warm-up, until every event was handled): this process, producer and
   * consumers together, and the PostgreSQL backends of both.
   */
  cpu: CpuProfile;
}

/** Produces one event; resolves with its id once committed (and the commit timestamp is taken). */
export type Produce = (i: number) => Promise<void>;

export const POLL_MS = OUTBOX_DEFAULTS.relay.pollIntervalMs;

/** Calls `produce` `rate` times a second for `seconds`, on schedule even when a commit is slow. */
export async function produceSteadily(
  rate: number,
  seconds: number,
  produce: Produce,
): Promise<{ produced: number; elapsedMs: number }> {
  const total = Math.round(rate * seconds);
  const intervalMs = 1000 / rate;
  const began = now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = began + i * intervalMs - now();
    if (wait >= 1) await sleep(wait);
    inFlight.push(produce(i));
  }
  await Promise.all(inFlight);
  return { produced: total, elapsedMs: now() - began };
}

/** An untimed first second at the same rate, on each side: code, connections and plans warm before measuring. */
export const WARM_UP_SECONDS = 1;

export async function warmUp(
  rate: number,
  produce: Produce,
  committedAt: Map<string, number>,
  handledAt: Map<string, number>,
): Promise<void> {
  const { produced } = await produceSteadily(rate, WARM_UP_SECONDS, produce);
  await waitUntil(() => handledAt.size >= produced, 3 * POLL_MS + 10_000);
  committedAt.clear();
  handledAt.clear();
}

export function summarize(
  committedAt: Map<string, number>,
  handledAt: Map<string, number>,
  produced: number,
  elapsedMs: number,
  cpu: CpuProfile,
): LatencyRun {
  const latencies: number[] = [];
  for (const [id, committed] of committedAt) {
    const handled = handledAt.get(id);
    if (handled !== undefined) latencies.push(handled - committed);
  }
  return {
    latencies,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: max(latencies),
    produced,
    missing: produced - latencies.length,
    ratePerS: (produced / elapsedMs) * 1000,
    cpu,
  };
}

/** What {@link timedRun} needs of a run: its producer, the two clocks' maps, and the backends to meter. */
export interface TimedRunPlan {
  query: RowsQuery;
  rate: number;
  seconds: number;
  produce: Produce;
  committedAt: Map<string, number>;
  handledAt: Map<string, number>;
  /** `application_name` of every connection of the system (producer and consumers). */
  applicationNames: readonly string[];
  /** How long the last events may take to be handled; default 10 s. */
  settleMs?: number;
  /** Runs after the warm-up, before the timed part (what it does is not timed). */
  afterWarmUp?: () => void;
}

/**
 * A warm-up, then `rate` events a second for `seconds`, until every one was handled (or `settleMs` passed):
 * latencies of the timed part, and its CPU (this process and the system's backends).
 */
export async function timedRun(plan: TimedRunPlan): Promise<LatencyRun> {
  const { rate, produce, committedAt, handledAt } = plan;
  await warmUp(rate, produce, committedAt, handledAt);
  plan.afterWarmUp?.();
  const meter = await CpuMeter.start(plan.query, plan.applicationNames);
  const { produced, elapsedMs } = await produceSteadily(rate, plan.seconds, produce);
  await waitUntil(() => handledAt.size >= produced, plan.settleMs ?? 10_000);
  return summarize(committedAt, handledAt, produced, elapsedMs, await meter.stop());
}

/** Runs of one side as one: percentiles over all their events together. */
export function pooled(runs: readonly LatencyRun[]): LatencyRun {
  const latencies = runs.flatMap((r) => r.latencies);
  const rounds = runs.map((r) => r.rounds).filter((r) => r !== undefined);
  return {
    rounds: rounds.length > 0 ? rounds.join('; ') : undefined,
    latencies,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: max(latencies),
    produced: runs.reduce((sum, r) => sum + r.produced, 0),
    missing: runs.reduce((sum, r) => sum + r.missing, 0),
    ratePerS: Math.min(...runs.map((r) => r.ratePerS)),
    cpu: {
      nodeMs: runs.reduce((sum, r) => sum + r.cpu.nodeMs, 0),
      postgresMs: runs.every((r) => r.cpu.postgresMs !== null)
        ? runs.reduce((sum, r) => sum + r.cpu.postgresMs!, 0)
        : null,
    },
  };
}

const RAW_PRODUCER = 'bench-raw-producer';
const RAW_NOTIFIER = 'bench-raw-notifier';
/** Every connection of a raw latency run: the producer's, the notifier's, and the relay's two. */
const RAW_APPLICATION_NAMES = [RAW_PRODUCER, RAW_NOTIFIER, ...NOTIFY_RELAY_APPLICATION_NAMES];

export async function measureRaw(context: BenchContext): Promise<LatencyRun> {
  const { db, options } = context;
  await db.truncate();
  // each side starts from a checkpoint: one forced by the earlier scenarios' WAL mid-run would land on one side only
  await db.checkpoint();
  const handledAt = new Map<string, number>();
  const committedAt = new Map<string, number>();
  const relay = await NotifyRelay.start(db.url, {
    tenantId: BENCH_TENANT,
    batchSize: OUTBOX_DEFAULTS.relay.batchSize,
    consumers: ['bench.latency'],
    onDelivery: (event) => {
      if (!handledAt.has(event.id)) handledAt.set(event.id, now());
    },
  });
  const pool = new Pool({ connectionString: db.url, max: 10, application_name: RAW_PRODUCER });
  const notifier = await RawSession.connect(db.url, RAW_NOTIFIER);
  // One connection sends the notifications, one after another (pg does not pipeline a client's queries).
  let notifying: Promise<unknown> = Promise.resolve();
  try {
    const produce: Produce = async () => {
      const id = await commitRawContactEvent(pool);
      committedAt.set(id, now());
      notifying = notifying.then(() => notifier.rows(notify(RAW_NOTIFY_CHANNEL)));
      await notifying;
    };
    return await timedRun({
      query: db.sql.bind(db),
      rate: options.sizes.latencyRate,
      seconds: options.sizes.latencySeconds,
      produce,
      committedAt,
      handledAt,
      applicationNames: RAW_APPLICATION_NAMES,
    });
  } finally {
    await relay.stop();
    await notifier.end();
    await pool.end();
  }
}

/** The raw side's business transaction with plain `pg`: a contact and its event; resolves with the event's id. */
export async function commitRawContactEvent(pool: Pool): Promise<string> {
  const id = randomUUID();
  const contactId = randomUUID();
  const email = `${contactId.slice(0, 8)}@example.com`;
  const client = await pool.connect();
  try {
    await client.query('begin');
    const contact = insertContact(contactId, BENCH_TENANT, 'Contact', email);
    await client.query(contact.text, contact.values);
    const event = insertEvent({
      id,
      tenantId: BENCH_TENANT,
      eventName: BENCH_EVENT,
      payloadJson: JSON.stringify({ contactId, name: 'Contact', email }),
      aggregateType: 'contact',
      aggregateId: contactId,
    });
    await client.query(event.text, event.values);
    await client.query('commit');
  } finally {
    client.release();
  }
  return id;
}

/**
 * A business transaction through the app: a contact and its event (`enqueue`), of `tenantId`; resolves with the
 * event's id.
 */
export function commitContactEvent(app: BenchApp, tenantId = BENCH_TENANT): Promise<string> {
  const contactId = randomUUID();
  const email = `${contactId.slice(0, 8)}@example.com`;
  return app.dataSource.transaction(async (manager) => {
    const contact = insertContact(contactId, tenantId, 'Contact', email);
    await manager.query(contact.text, contact.values);
    return app.outbox.enqueue(manager, {
      tenantId,
      eventName: BENCH_EVENT,
      payload: { contactId, name: 'Contact', email },
      aggregateType: 'contact',
      aggregateId: contactId,
    });
  });
}

/**
 * How the library's relay learns of a commit: by itself in the producer's app (`automatic`), from an explicit
 * `relay.wake()` after each commit (`woken`), or from the NOTIFY of a producer app that does not relay
 * (`notified`).
 */
export type WakePath = 'automatic' | 'woken' | 'notified';

const LIBRARY_APP = 'bench-latency';
const LIBRARY_PRODUCER_APP = 'bench-latency-producer';

/**
 * `probe: false` leaves the query probe off (no `rounds` then): it wraps every query and keeps each statement until
 * the run is read, which the raw relay and the peers do not carry (measured: p99 1.71 ms with it, 1.15 ms without,
 * over 6 runs of 8 s each in turns, 2026-12-02).
 */
export async function measureLibrary(
  context: BenchContext,
  path: WakePath,
  { probe = true }: { probe?: boolean } = {},
): Promise<LatencyRun> {
  const { db, options } = context;
  await db.truncate();
  // each side starts from a checkpoint: one forced by the earlier scenarios' WAL mid-run would land on one side only
  await db.checkpoint();
  // Scheduled mode with the default poll interval: what an app gets from OutboxModule.forRoot().
  const app = await createBenchApp({
    url: db.url,
    consumers: [LatencyConsumer],
    relay: { enabled: true },
    applicationName: LIBRARY_APP,
    probe,
  });
  // A web instance's app: it does not relay, so it sends the wake-up NOTIFY (the default when relay.enabled is false).
  const producer =
    path === 'notified'
      ? await createBenchApp({
          url: db.url,
          consumers: [],
          relay: { enabled: false },
          applicationName: LIBRARY_PRODUCER_APP,
          probe,
        }).catch(async (error: unknown) => {
          await app.close();
          throw error;
        })
      : app;
  const handledAt = app.context.get(LatencyConsumer).handledAt;
  const committedAt = new Map<string, number>();
  try {
    const produce: Produce = async () => {
      const id = await commitContactEvent(producer);
      committedAt.set(id, now());
      if (path === 'woken') app.relay.wake();
    };
    const run = await timedRun({
      query: db.sql.bind(db),
      rate: options.sizes.latencyRate,
      seconds: options.sizes.latencySeconds,
      produce,
      committedAt,
      handledAt,
      applicationNames: [LIBRARY_APP, LIBRARY_PRODUCER_APP],
      settleMs: 3 * POLL_MS + 10_000,
      // the statements counted are the timed part's
      afterWarmUp: () => {
        app.probe.take();
        producer.probe.take();
      },
    });
    // the producer's statements and NOTIFYs are counted where they are sent
    const kinds = app.probe.take().kinds;
    if (producer !== app) addKinds(kinds, producer.probe.take().kinds);
    return { ...run, ...(probe ? { rounds: describeRounds(kinds, run.produced) } : {}) };
  } finally {
    if (producer !== app) await producer.close();
    await app.close();
  }
}

/**
 * `412 claims (1.8 events each), about 3 statements per claim, 100 due-tenant scans` from the app's statement
 * counts. A claim is a relay's visit to the tenant; the scans run at most every 100 ms while wake-ups name it.
 */
export function describeRounds(kinds: Map<string, QueryKindStats>, events: number): string {
  const rounds = [...kinds].reduce((sum, [kind, k]) => sum + (kind.startsWith('claim') ? k.count : 0), 0);
  if (rounds === 0) return 'no relay claim seen';
  const count = (kind: string): number => kinds.get(kind)?.count ?? 0;
  const all = [...kinds.values()].reduce((sum, k) => sum + k.count, 0);
  // The producer's share: begin, contact, event and commit per event, and the wake-up NOTIFYs.
  const relay =
    all - 2 * events - count('business insert') - count('enqueue insert') - count('wake-up notify');
  return (
    `${rounds} claims (${(events / rounds).toFixed(1)} events each), ` +
    `about ${(relay / rounds).toFixed(1)} statements per claim, ${count('due tenants')} due-tenant scans; ` +
    `${count('wake-up notify')} wake-up NOTIFYs for ${events} commits`
  );
}
