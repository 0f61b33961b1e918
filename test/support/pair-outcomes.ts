import type { DeliveryOutcome } from '../../libs/outbox/src/model/delivery-outcome';
import { TENANT } from './outbox-fixture';

/** The outcome of an in-process pair delivered at its first attempt, as a relay's batch records it. */
export function deliveredPair(eventId: string, eventSeq: string, consumer: string): DeliveryOutcome {
  return {
    deliveryId: null,
    pair: { eventId, consumer, attempt: 1, tenantId: TENANT, eventSeq },
    status: 'delivered',
    errorCode: null,
    error: null,
    retryInMs: 0,
  };
}
