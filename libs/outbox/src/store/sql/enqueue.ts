import type { ValidatedEvent } from '../../model/event-validation';
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** One row of `event_outbox` to insert: a checked event and its id. */
export interface EventRow extends ValidatedEvent {
  id: string;
  /** The W3C traceparent active at enqueue (tracing module only); without it the column is not written. */
  traceparent?: string | null;
}

/** Inserts one event (the common case: one round trip, no arrays to unpack). */
export function insertEvent(n: OutboxNames, e: EventRow): SqlStatement {
  // tracing: the trace context column only when there is one (an app without tracing sends what it always did)
  const traced = e.traceparent ? [', traceparent', ', $10'] : ['', ''];
  return {
    text: `insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${traced[0]})
           values ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, coalesce($9::timestamptz, now())${traced[1]})`,
    values: [
      e.id,
      e.tenantId,
      e.eventName,
      e.payloadJson,
      e.aggregateType,
      e.aggregateId,
      e.correlationId,
      e.schemaVersion,
      e.occurredAt,
      ...(e.traceparent ? [e.traceparent] : []),
    ],
  };
}

/** Inserts many events in one statement; `seq` keeps their order. */
export function insertEvents(n: OutboxNames, rows: readonly EventRow[]): SqlStatement {
  // tracing: as in insertEvent, the column only when a trace context was captured
  const traced = rows.some((r) => r.traceparent);
  const t = traced ? [', traceparent', ', $10::text[]', ', traceparent'] : ['', '', ''];
  return {
    text: `insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${t[0]})
           select id, tenant_id, event_name, payload::jsonb, aggregate_type, aggregate_id, correlation_id, schema_version, coalesce(occurred_at, now())${t[2]}
             from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::timestamptz[]${t[1]})
               with ordinality as t(id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${t[0]}, n)
            order by n`,
    values: [
      rows.map((r) => r.id),
      rows.map((r) => r.tenantId),
      rows.map((r) => r.eventName),
      rows.map((r) => r.payloadJson),
      rows.map((r) => r.aggregateType),
      rows.map((r) => r.aggregateId),
      rows.map((r) => r.correlationId),
      rows.map((r) => r.schemaVersion),
      rows.map((r) => r.occurredAt),
      ...(traced ? [rows.map((r) => r.traceparent ?? null)] : []),
    ],
  };
}
