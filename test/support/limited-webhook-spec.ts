/**
 * The set-up of the specs of limited webhooks and subscriptions: a database and a loopback receiver that notes
 * when each request arrived, the spec's apps closed after each test, and a check that every event was delivered
 * once, on its first attempt.
 */
import type { TestApp } from './build-app';
import type { TestDatabase } from './test-database';
import { useDatabaseAndReceiver, type WebhookReceiver } from './webhook-receiver';
import { waitFor } from './wait-for';
import { truncateOutbox } from './outbox-fixture';
import { deliveredCount, deliveryCounts } from './forwarding';
import { busiestWindow, rateLogQuiet } from './rate-windows';

/** The relays' claim size in these specs. */
export const BATCH = 5;
/**
 * Relays that poll often (room freed by a window sliding is found within 50 ms: the docs' "one poll per window"),
 * one batch at a time each.
 */
export const RUNNING = { enabled: true, pollIntervalMs: 50, batchSize: BATCH, concurrency: 1 };

/** What the tests of such a spec read: set once its hooks ran. */
export interface LimitedWebhookSpec {
  readonly db: TestDatabase;
  readonly receiver: WebhookReceiver;
  /** The apps a test started: closed after it. */
  readonly apps: TestApp[];
  /** When each request arrived (ms), unless a test's `reply` says otherwise; emptied before each test. */
  readonly arrivals: number[];
}

/** The hooks of such a spec; `tables` are emptied with the outbox's before each test. */
export function useLimitedWebhookSpec(...tables: string[]): LimitedWebhookSpec {
  const made = useDatabaseAndReceiver();
  const spec = { apps: [] as TestApp[], arrivals: [] as number[] } as {
    db: TestDatabase;
    receiver: WebhookReceiver;
    apps: TestApp[];
    arrivals: number[];
  };
  beforeEach(async () => {
    ({ db: spec.db, receiver: spec.receiver } = made);
    await truncateOutbox(spec.db, ...tables);
    spec.receiver.requests.length = 0;
    spec.arrivals.length = 0;
    spec.receiver.reply = () => {
      spec.arrivals.push(Date.now());
      return {};
    };
  });
  afterEach(async () => {
    await Promise.all(spec.apps.map((a) => a.close()));
    spec.apps.length = 0;
  });
  return spec;
}

/** Waits until every one of `ids` is delivered to `consumer`; checks each was sent once, on its first attempt. */
export async function deliveredOnce(
  { db, receiver }: LimitedWebhookSpec,
  consumer: string,
  ids: readonly string[],
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(async () => (await deliveredCount(db, consumer)) === ids.length, {
    timeoutMs,
    message: `${ids.length} deliveries to ${consumer}`,
  });
  const sent = receiver.requests.filter((r) => r.status === 200).map((r) => r.id);
  expect([...sent].sort()).toEqual([...ids].sort());
  expect(await deliveryCounts(db, consumer)).toEqual([
    expect.objectContaining({ status: 'delivered', n: ids.length, attempts: 1 }),
  ]);
}

/**
 * Has each relay send a few requests first (`enqueue` makes them), then waits until `consumer`'s rate log has
 * nothing of the last `intervalMs` and empties the outbox and the receiver's notes: a relay's first requests wait
 * for their connection (up to 170 ms, against a few ms later), so a window opened by one of them at the server
 * would also hold the next window's requests, sent without that wait.
 */
export async function warmUp(
  spec: LimitedWebhookSpec,
  consumer: string,
  enqueue: () => Promise<string[]>,
  intervalMs: number,
): Promise<void> {
  const ids = await enqueue();
  await waitFor(async () => (await deliveredCount(spec.db, consumer)) === ids.length, {
    timeoutMs: 20_000,
    message: 'the warm-up requests',
  });
  await rateLogQuiet(spec.db, consumer, intervalMs);
  await truncateOutbox(spec.db);
  spec.receiver.requests.length = 0;
  spec.arrivals.length = 0;
}

/**
 * Checks the arrivals of a rate-limited consumer's requests at the server: its busiest window within the limit
 * and `claims` more (the claims taken while a window's first request was on its way: one per relay lane), and the
 * limit reached — within 10 % of four windows' worth in the first four intervals, and at most a claim of `batch`
 * more. Returns the busiest window.
 */
export function expectRateHeld(
  arrivals: readonly number[],
  limit: { limit: number; intervalMs: number },
  { claims, batch }: { claims: number; batch: number },
): number {
  const busiest = busiestWindow(arrivals, limit.intervalMs);
  process.stdout.write(`busiest window of requests at the server: ${busiest}\n`);
  expect(busiest).toBeLessThanOrEqual(limit.limit + claims * batch);
  const first = Math.min(...arrivals);
  const inFour = arrivals.filter((at) => at < first + 4 * limit.intervalMs).length;
  expect(inFour).toBeGreaterThanOrEqual(0.9 * 4 * limit.limit);
  // the claims' windows and the server's are offset by the send time: the last window's edge can hold the claims
  // taken in one instant, one per relay (90 of 85 seen once on the partitioned layout with two relays)
  expect(inFour).toBeLessThanOrEqual(4 * limit.limit + claims * batch);
  return busiest;
}
