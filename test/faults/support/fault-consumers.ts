import type { OutboxEvent, OutboxHandlerContext } from 'nestjs-pg-outbox';
import type { FaultRandom } from './fault-random';

/** The consumers' own table for the fault suite: no unique key, so a duplicate effect is a second row. */
export const FAULT_EFFECTS_SQL = `create table fault_effects (
  id bigint generated always as identity primary key,
  event_id uuid not null,
  consumer text not null
)`;

/** Writes one effect row in the delivery's transaction. */
export async function recordFaultEffect(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
  await context.manager.query('insert into fault_effects (event_id, consumer) values ($1, $2)', [
    event.eventId,
    context.consumer,
  ]);
}

/**
 * With a `flaky` source of choices: about 1 call in 10 throws, 1 in 40 hangs past its timeout, 1 in 10 takes
 * 10× longer than the usual ~1 ms. Decided by the seed, the event's place in the load (its aggregate id),
 * the attempt and the consumer: whichever relay runs it, and in whatever order, a seed makes the same calls
 * fail again.
 */
export async function flakyPause(
  event: OutboxEvent,
  context: OutboxHandlerContext,
  flaky: FaultRandom | null,
): Promise<void> {
  if (!flaky) return;
  const key = `${event.aggregateId ?? event.eventId}:${context.attempt}:${context.consumer}`;
  const roll = flaky.intFor(key, 40);
  if (roll < 4) throw new Error(`flaky failure (roll ${roll})`);
  if (roll === 4) await new Promise((resolve) => setTimeout(resolve, 60_000)); // hangs past the timeout
  if (roll >= 5 && roll < 9) await new Promise((resolve) => setTimeout(resolve, 10));
}
