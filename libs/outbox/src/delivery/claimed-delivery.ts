import type { OutboxEvent } from '../interfaces/outbox-event.interface';

/** A delivery this relay claimed, with its event, as read from the claim statements. */
export interface ClaimedDelivery {
  /**
   * The delivery row, or null for an in-process pair claimed through its event: its row is written once, with
   * the outcome.
   */
  deliveryId: string | null;
  consumerName: string;
  /** 1-based, counted at claim time. */
  attempt: number;
  /** True when the previous attempt's relay died or stalled without recording an outcome. */
  recovered: boolean;
  /** The event's insert order (bigint as text); set for in-process pairs, whose row is written with the outcome. */
  eventSeq?: string;
  event: OutboxEvent;
}

/** A row of the claim statements. */
export interface ClaimedRow {
  delivery_id: string | null;
  consumer_name: string | null;
  attempt_count: number;
  recovered: boolean;
  event_id: string;
  tenant_id: string;
  event_name: string;
  payload: OutboxEvent['data'];
  aggregate_type: string | null;
  aggregate_id: string | null;
  occurred_at: Date;
  correlation_id: string | null;
  schema_version: number;
  /** The event's insert order (bigint, as text), on the rows of in-process pairs. */
  event_seq?: string | null;
}

/** Turns a claim row into a delivery with the envelope handlers receive. */
export function toClaimedDelivery(row: ClaimedRow & { consumer_name: string }): ClaimedDelivery {
  return {
    deliveryId: row.delivery_id === null ? null : String(row.delivery_id),
    consumerName: row.consumer_name,
    attempt: row.attempt_count,
    recovered: row.recovered,
    eventSeq: row.event_seq ?? undefined,
    event: {
      eventId: row.event_id,
      eventName: row.event_name,
      tenantId: row.tenant_id,
      aggregateType: row.aggregate_type,
      aggregateId: row.aggregate_id,
      occurredAt: row.occurred_at,
      correlationId: row.correlation_id,
      schemaVersion: row.schema_version,
      data: row.payload,
    },
  };
}

/** A row of the fan-out statement (see `fanOutPendingEvents` for its five kinds). */
export type FanOutRow = Omit<ClaimedRow, 'recovered' | 'consumer_name' | 'attempt_count'> & {
  kind: 'row' | 'pair' | 'lease' | 'event' | 'lost';
  consumer_name: string | null;
  attempt_count: number | null;
};

/**
 * The deliveries a fan-out claimed, and how many events it took: pairs count only when their event's lease was
 * won by this claim; their attempt is the event's claim count, and a count above one means an earlier claim
 * never recorded its outcome. `lost`: events the claim locked but another relay holds the lease of.
 */
export function fromFanOut(rows: readonly FanOutRow[]): {
  deliveries: ClaimedDelivery[];
  events: number;
  lost: number;
} {
  const claims = new Map<string, number>();
  const events = new Set<string>();
  let lost = 0;
  for (const row of rows) {
    if (row.kind === 'lease') claims.set(row.event_id, row.attempt_count!);
    if (row.kind === 'lease' || row.kind === 'event') events.add(row.event_id);
    if (row.kind === 'lost') lost++;
  }
  const deliveries: ClaimedDelivery[] = [];
  for (const row of rows) {
    if (row.kind === 'row') {
      deliveries.push(
        toClaimedDelivery({ ...row, consumer_name: row.consumer_name!, attempt_count: 1, recovered: false }),
      );
    } else if (row.kind === 'pair') {
      const claim = claims.get(row.event_id);
      if (claim === undefined) continue;
      deliveries.push(
        toClaimedDelivery({ ...row, consumer_name: row.consumer_name!, attempt_count: claim, recovered: claim > 1 }),
      );
    }
  }
  return { deliveries, events: events.size, lost };
}
