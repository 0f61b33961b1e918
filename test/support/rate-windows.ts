/**
 * What the specs of limited external consumers (webhooks, forwarders) measure at the receiving end: the busiest
 * window of arrivals, and a wait for a consumer's rate log to hold nothing of the last interval.
 */
import type { TestDatabase } from './test-database';
import { waitFor } from './wait-for';

/** The most arrivals (ms timestamps) that fall in one window of `ms`, over every window starting at an arrival. */
export function busiestWindow(arrivals: readonly number[], ms: number): number {
  const sorted = [...arrivals].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[j]! < sorted[i]! - ms + 1) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** Waits until `consumer`'s rate log (`outbox_consumer_limits`) has no claim of the last `intervalMs`. */
export function rateLogQuiet(db: TestDatabase, consumer: string, intervalMs: number): Promise<boolean> {
  return waitFor(
    async () =>
      (
        await db.sql<{ quiet: boolean }>(
          `select coalesce(max(s) < clock_timestamp() - $2 * interval '1 millisecond', true) as quiet
             from outbox_consumer_limits, unnest(started_at) s where consumer_name = $1`,
          [consumer, intervalMs],
        )
      )[0]!.quiet,
    { timeoutMs: 10_000, message: `the rate log of ${consumer} to empty` },
  );
}
