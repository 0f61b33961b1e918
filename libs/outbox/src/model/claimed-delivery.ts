import type { OutboxEvent } from './outbox-event.interface';

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
  /** Times it was snoozed (`outbox_deliveries.snoozes`); 0 when left out (a delivery claimed for the first time). */
  snoozes?: number;
  /** The event's insert order (bigint as text); set for in-process pairs, whose row is written with the outcome. */
  eventSeq?: string;
  /**
   * The event and tenant as claimed: where the outcome is recorded. Not read from `event`, the envelope
   * handlers receive (shared by an event's consumers, and writable by them).
   */
  eventId: string;
  tenantId: string;
  event: OutboxEvent;
  /** The W3C traceparent captured when the event was enqueued (tracing), or null. */
  traceparent?: string | null;
}

/** A row of the claim statements. */
export interface ClaimedRow {
  delivery_id: string | null;
  consumer_name: string | null;
  attempt_count: number;
  recovered: boolean;
  /** Times the delivery row was snoozed (the due claim only). */
  snoozes?: number;
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
  traceparent?: string | null;
}

/** The envelope handlers receive, from a claim row. */
function toEvent(
  row: Omit<ClaimedRow, 'delivery_id' | 'consumer_name' | 'attempt_count' | 'recovered' | 'snoozes'>,
): OutboxEvent {
  return {
    eventId: row.event_id,
    eventName: row.event_name,
    tenantId: row.tenant_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    occurredAt: row.occurred_at,
    correlationId: row.correlation_id,
    schemaVersion: row.schema_version,
    data: row.payload,
  };
}

/** Turns a claim row into a delivery with the envelope handlers receive. */
export function toClaimedDelivery(row: ClaimedRow & { consumer_name: string }): ClaimedDelivery {
  return {
    deliveryId: row.delivery_id === null ? null : String(row.delivery_id),
    consumerName: row.consumer_name,
    attempt: row.attempt_count,
    recovered: row.recovered,
    snoozes: row.snoozes ?? 0,
    eventSeq: row.event_seq ?? undefined,
    eventId: row.event_id,
    tenantId: row.tenant_id,
    event: toEvent(row),
    traceparent: row.traceparent ?? null,
  };
}

/** An event as the fan-out sends it (JSON: its time as text). */
interface FanOutEvent {
  event_id: string;
  tenant_id: string;
  event_name: string;
  payload: OutboxEvent['data'];
  aggregate_type: string | null;
  aggregate_id: string | null;
  occurred_at: string;
  correlation_id: string | null;
  schema_version: number;
  /** The event's insert order (bigint, as text). */
  event_seq: string;
  traceparent?: string | null;
}

/**
 * What a claim of new events read about its tenant's pending events at or above the position it scanned from
 * (`from`), in its own snapshot: the lowest and highest such `seq` (null: none), and the snapshot's `xmin` and
 * `xmax` (transaction ids, as text). See `ClaimPositions` (store/claim-positions.ts).
 */
export interface PositionReading {
  first: string | null;
  last: string | null;
  xmin: string;
  xmax: string;
  /** When the server's postmaster started, in microseconds (`SERVER_START`): another value, another server. */
  server: string;
  /** The claim's transaction time, ISO 8601 in UTC (`DATABASE_NOW`). */
  now?: string;
  /** True when the claim looked at every expired event lease of its tenant since its bound (`leasesSince`). */
  recovered?: boolean;
}

/**
 * Why a claim of new events took the fan-out rather than the lean claim (docs/adr/0804, addendum of 2026-12-06):
 * the round did not ask the lean claim — the policy has none (`policy`), the tenant has due deliveries (`due`), an
 * ordered consumer or a limited tenant consumer is hosted (`orderedOrLimited`), the tenant has consumers of its own
 * (`tenantConsumers`), a hosted consumer is not in-process (`notInProcess`), a `routes` answer came within the
 * last 30 s (`refused`) — or the lean claim answered a fallback (`routes`, `unrouted`, `stale`).
 */
export type FanOutReason =
  | 'policy'
  | 'due'
  | 'orderedOrLimited'
  | 'tenantConsumers'
  | 'notInProcess'
  | 'refused'
  | 'routes'
  | 'unrouted'
  | 'stale';

/** The one row of the fan-out statement (see `fanOutPendingEvents`). */
export interface FanOutResult {
  /** Delivery rows leased by the claim, each with its event. */
  deliveries: (FanOutEvent & { delivery_id: string; consumer_name: string })[];
  /** Events leased by the claim, with their claim count and the consumers of their in-process pairs. */
  leases: (FanOutEvent & { claim_count: number; pairs: string | null })[];
  /** Events the claim wrote (`processing` or `no_handlers`). */
  written: string[];
  /** Events the claim locked whose live lease another relay holds. */
  lost: number;
  /** From the lean claim (`claimNewEvents`) when it claimed nothing and the fan-out must run instead, and why. */
  fallback?: 'routes' | 'unrouted' | 'stale' | null;
  /** What the claim read for its tenant's claim position (`ClaimPositions`). */
  position?: PositionReading;
}

/**
 * The deliveries a fan-out claimed, and how many events it took: the delivery rows it leased, in the order
 * returned, then the pairs of each leased event (one envelope per event, shared by its consumers), their
 * attempt the event's claim count (above one: an earlier claim never recorded its outcome).
 * `lost`: events the claim locked but another relay holds the lease of.
 */
export function fromFanOut(result: FanOutResult): {
  deliveries: ClaimedDelivery[];
  events: number;
  lost: number;
} {
  // an event with pairs and rows both is leased and written
  const events = new Set<string>(result.written);
  const deliveries: ClaimedDelivery[] = [];
  for (const row of result.deliveries) {
    deliveries.push(
      toClaimedDelivery({
        ...row,
        occurred_at: new Date(row.occurred_at),
        event_seq: null,
        attempt_count: 1,
        recovered: false,
      }),
    );
  }
  for (const row of result.leases) {
    events.add(row.event_id);
    const event = toEvent({ ...row, occurred_at: new Date(row.occurred_at) });
    const claims = row.claim_count;
    for (const consumerName of row.pairs?.split(' ') ?? []) {
      deliveries.push({
        deliveryId: null,
        consumerName,
        attempt: claims,
        recovered: claims > 1,
        eventSeq: row.event_seq,
        eventId: row.event_id,
        tenantId: row.tenant_id,
        event,
        traceparent: row.traceparent ?? null,
      });
    }
  }
  return { deliveries, events: events.size, lost: result.lost };
}
