/**
 * The raw-SQL batched relay, the baseline the library is measured against: per batch, one transaction that
 * claims N pending events (`skip locked`), runs the handlers, then records deliveries, inbox rows and the
 * events' status in one statement over arrays. 4 round trips per batch, plus the handlers' own writes.
 */
import { writesEffect } from '../harness/bench-consumers';
import { claimPendingEvents, insertEffect, recordBatch, type RawEventRow } from './raw.queries';
import type { RawSession } from './raw-session';

/** What a raw relay delivers and to whom. */
export interface RawRelayPlan {
  /** The tenant whose events it relays (the bench has one). */
  tenantId: string;
  batchSize: number;
  consumers: readonly string[];
  /** Called for each (event, consumer), like a handler; the effect consumer also writes its row. */
  onDelivery?: (event: RawEventRow, consumer: string) => void;
}

/** One batch; returns the number of events relayed (0 when nothing was pending). */
export async function runBatchedRound(session: RawSession, plan: RawRelayPlan): Promise<number> {
  return session.transaction(async () => {
    const events = await session.rows<RawEventRow>(claimPendingEvents(plan.tenantId, plan.batchSize));
    if (events.length === 0) return 0;
    for (const event of events) {
      for (const consumer of plan.consumers) {
        plan.onDelivery?.(event, consumer);
        if (writesEffect(consumer)) await session.rows(insertEffect(event.id, consumer));
      }
    }
    await session.rows(recordBatch(events, plan.consumers));
    return events.length;
  });
}

/** Runs batches until one finds nothing; returns the events relayed. */
export async function drainBatched(session: RawSession, plan: RawRelayPlan): Promise<number> {
  let total = 0;
  for (;;) {
    const relayed = await runBatchedRound(session, plan);
    if (relayed === 0) return total;
    total += relayed;
  }
}
