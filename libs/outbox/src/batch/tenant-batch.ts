import { randomUUID } from 'node:crypto';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { emptyRound, type RelayRoundResult } from '../model/relay-round';

/**
 * The logger context of every part of the relay: operators filter the relay's lines by it, as they did when
 * it was one class.
 */
export const RELAY_LOG_CONTEXT = 'OutboxRelay';

/** One tenant's claim in a round: the lease token of everything it claimed, and what the round did so far. */
export interface TenantBatch {
  readonly tenantId: string;
  /** The token of every lease this claim took (delivery rows and events); fences its outcomes. */
  readonly leaseToken: string;
  /** Counts of this tenant's round, added to as outcomes are recorded. */
  readonly result: RelayRoundResult;
}

/** A new batch for a tenant, with a fresh lease token. */
export function newTenantBatch(tenantId: string): TenantBatch {
  // one object, not a spread copy of another (a visit makes one per round)
  const result = emptyRound();
  result.tenants = 1;
  return { tenantId, leaseToken: randomUUID(), result };
}

/** A claimed delivery with the consumer that will take it. */
export interface Assigned {
  delivery: ClaimedDelivery;
  consumer: OutboxConsumer;
}

/** A claimed delivery settled without a handler (its consumer is gone, or its attempts kept dying). */
export interface Settled {
  delivery: ClaimedDelivery;
  outcome: DeliveryOutcome;
}

/** Adds the outcomes to the counts of `result` (`by` -1: takes them back out). */
export function count(outcomes: readonly DeliveryOutcome[], result: RelayRoundResult, by = 1): void {
  // by index: no iterator (it runs inside the batch's async function)
  for (let at = 0; at < outcomes.length; at++) {
    const outcome = outcomes[at]!;
    if (outcome.status === 'delivered') result.succeeded += by;
    else if (outcome.status === 'dead') result.dead += by;
    else result.failed += by;
  }
}
