/**
 * The reference CRM's relay (seeds/000, `process_outbox_batch`), on our tables: one transaction per batch, but
 * a statement per event and per (event, consumer) inside it — select the delivered consumers, upsert a delivery
 * row and insert an inbox row per consumer, mark the event published. Its stuck-event recovery scan is left
 * out (it would only make the reference slower).
 */
import { writesEffect } from '../harness/bench-consumers';
import {
  crmClaimEvents,
  crmDeliveredConsumers,
  crmInsertInbox,
  crmMarkPublished,
  crmSetTenant,
  crmUpsertDelivery,
  insertEffect,
  type RawEventRow,
} from './raw.queries';
import type { RawRelayPlan } from './batched-relay';
import type { RawSession } from './raw-session';

/** One batch of the reference pattern; returns the number of events relayed. */
export async function runPerEventRound(session: RawSession, plan: RawRelayPlan): Promise<number> {
  return session.transaction(async () => {
    await session.rows(crmSetTenant(plan.tenantId));
    const events = await session.rows<RawEventRow>(crmClaimEvents(plan.tenantId, plan.batchSize));
    for (const event of events) {
      const delivered = await session.rows<{ consumer_name: string }>(crmDeliveredConsumers(event.id));
      const done = new Set(delivered.map((r) => r.consumer_name));
      const pending = plan.consumers.filter((c) => !done.has(c));
      for (const consumer of pending) {
        plan.onDelivery?.(event, consumer);
        if (writesEffect(consumer)) await session.rows(insertEffect(event.id, consumer));
      }
      for (const consumer of pending) {
        await session.rows(crmUpsertDelivery(event, consumer));
        await session.rows(crmInsertInbox(event.id, consumer, event.tenant_id));
      }
      await session.rows(crmMarkPublished(event.id));
    }
    return events.length;
  });
}

/** Runs batches until one finds nothing; returns the events relayed. */
export async function drainPerEvent(session: RawSession, plan: RawRelayPlan): Promise<number> {
  let total = 0;
  for (;;) {
    const relayed = await runPerEventRound(session, plan);
    if (relayed === 0) return total;
    total += relayed;
  }
}
