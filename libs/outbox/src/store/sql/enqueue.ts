import type { ValidatedEvent } from '../../model/event-validation';
import { textPerNames, type SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import { carriedWakeup } from './wakeup';

/** One row of `event_outbox` to insert: a checked event and its id. */
export interface EventRow extends ValidatedEvent {
  id: string;
  /** The W3C traceparent active at enqueue (tracing module only); without it the column is not written. */
  traceparent?: string | null;
}

/**
 * Inserts one event (the common case: one round trip, no arrays to unpack). With `wake`, the insert carries a
 * wake-up whose payload that is (`carriedWakeup`); the other inserts below take it the same way.
 */
export function insertEvent(n: OutboxNames, e: EventRow, wake?: string): SqlStatement {
  // tracing: the trace context column only when there is one (an app without tracing sends what it always did)
  const values = withTrace(eventValues(e), e);
  if (wake === undefined) return { text: (e.traceparent ? tracedInsertText : insertText)(n), values };
  values.push(wake);
  return { text: (e.traceparent ? tracedCarryingText : carryingText)(n), values };
}

/**
 * `insertEvent`'s texts, made once per app's names (`textPerNames`): the same string each call, so `enqueue`
 * neither joins nor flattens a 300-character text per event, and the named statement's lookup by text hashes it
 * once (ADR 1004's addendum of 2026-12-07). With and without the trace context, each plain or carrying a wake-up.
 */
const insertText = textPerNames((n) => insertEventText(n, '', '', false));
const tracedInsertText = textPerNames((n) => insertEventText(n, ', traceparent', ', $10', false));
const carryingText = textPerNames((n) => insertEventText(n, '', '', true));
const tracedCarryingText = textPerNames((n) => insertEventText(n, ', traceparent', ', $10', true));

function insertEventText(n: OutboxNames, column: string, value: string, carrying: boolean): string {
  const into = `insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${column})`;
  const row = `$1, $2, $3, $4::jsonb, $5, $6, $7, $8, coalesce($9::timestamptz, now())${value}`;
  // carrying: the same row selected from the wake-up's one row (the parameters take the columns' types as in `values`)
  if (carrying) return `${carriedWakeup(n, value ? 11 : 10)}${into}\n           select ${row} from wake`;
  return `${into}\n           values (${row})`;
}

/**
 * The nine values of an event's insert, without its trace context: a fresh array each insert extends in place
 * (`push`, not a spread copy: see docs/adr/1004's addendum of 2026-12-07).
 */
export function eventValues(e: EventRow): unknown[] {
  return [
    e.id,
    e.tenantId,
    e.eventName,
    e.payloadJson,
    e.aggregateType,
    e.aggregateId,
    e.correlationId,
    e.schemaVersion,
    e.occurredAt,
  ];
}

/** `values` with the event's trace context last, when it has one (its column is then written). */
export function withTrace(values: unknown[], e: EventRow): unknown[] {
  if (e.traceparent) values.push(e.traceparent);
  return values;
}

/** Inserts many events in one statement; `seq` keeps their order. */
export function insertEvents(n: OutboxNames, rows: readonly EventRow[], wake?: string): SqlStatement {
  // tracing: as in insertEvent, the column only when a trace context was captured
  const traced = rows.some((r) => r.traceparent);
  const t = traced ? [', traceparent', ', $10::text[]', ', traceparent'] : ['', '', ''];
  const values = traced ? [...eventArrays(rows), rows.map((r) => r.traceparent ?? null)] : eventArrays(rows);
  return {
    text: `${carrying(n, values, wake)}insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${t[0]})
           select id, tenant_id, event_name, payload::jsonb, aggregate_type, aggregate_id, correlation_id, schema_version, coalesce(occurred_at, now())${t[2]}
             from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::timestamptz[]${t[1]})
               with ordinality as t(id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${t[0]}, n)${wakeJoin(wake)}
            order by n`,
    values,
  };
}

/**
 * The start of an insert that carries the wake-up `wake` (none without one): its CTE, the payload the last of
 * `values` (pushed here).
 */
function carrying(n: OutboxNames, values: unknown[], wake: string | undefined): string {
  if (wake === undefined) return '';
  values.push(wake);
  return carriedWakeup(n, values.length);
}

/** How an insert from a select reads the carried wake-up's one row: joined to its source (none without one). */
function wakeJoin(wake: string | undefined): string {
  return wake === undefined ? '' : ' cross join wake';
}

/** The nine arrays of an insert of many events, without their trace contexts. */
export function eventArrays(rows: readonly EventRow[]): unknown[] {
  return [
    rows.map((r) => r.id),
    rows.map((r) => r.tenantId),
    rows.map((r) => r.eventName),
    rows.map((r) => r.payloadJson),
    rows.map((r) => r.aggregateType),
    rows.map((r) => r.aggregateId),
    rows.map((r) => r.correlationId),
    rows.map((r) => r.schemaVersion),
    rows.map((r) => r.occurredAt),
  ];
}

/** `values` with the delay's two values last (`deliverAt`, `delayMs`). */
export function withDelay(values: unknown[], e: EventRow): unknown[] {
  values.push(e.deliverAt ?? null, e.delayMs ?? null);
  return values;
}

/** True when the row was given `deliverAt` or `delayMs`: it goes in with `insertScheduledEvent(s)`. */
export function isDelayed(row: EventRow): boolean {
  return (row.deliverAt ?? null) !== null || (row.delayMs ?? null) !== null;
}

/**
 * When a delayed event may be delivered, by the database's clock: `deliverAt` as given, else the insert's
 * `now()` plus `delayMs`. An event already due then is written `pending`, as `insertEvent` writes it; a later one
 * `scheduled`, out of every claim's index, until `promoteScheduled` makes it pending
 * (docs/adr/1102-delayed-events-are-promoted.md).
 */
function deliverAtSql(at: string, ms: string): string {
  return `coalesce(${at}::timestamptz, now() + ${ms}::float8 * interval '1 millisecond')`;
}

/**
 * The source a delayed insert selects `d.at` from, given the SQL of a row's `deliverAt` and `delayMs`: null when
 * both are null (not delayed). Its columns and their values: `SCHEDULED_COLUMNS`, `SCHEDULED_VALUES`.
 */
export function deliverAtFrom(at: string, ms: string): string {
  return `(select case when ${at} is not null or ${ms} is not null then ${deliverAtSql(at, ms)} end as at) d`;
}

/** The columns a delayed insert adds after `occurred_at`. */
export const SCHEDULED_COLUMNS = ', deliver_at, status';
/** Their values, from `deliverAtFrom`'s `d`: an event not delayed, or due already, is `pending`. */
export const SCHEDULED_VALUES = `, d.at, case when d.at is null or d.at <= now() then 'pending' else 'scheduled' end`;

/** Inserts one delayed event. Its own text, so the undelayed insert's named statement stays as it was (ADR 0807). */
export function insertScheduledEvent(n: OutboxNames, e: EventRow, wake?: string): SqlStatement {
  const traced = e.traceparent ? [', traceparent', ', $12::text'] : ['', ''];
  // the undelayed insert's nine values first (its text is not sent), then the delay's two
  const values = withTrace(withDelay(eventValues(e), e), e);
  return {
    text: `${carrying(n, values, wake)}insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${SCHEDULED_COLUMNS}${traced[0]})
           select $1::uuid, $2::uuid, $3::text, $4::jsonb, $5::text, $6::text, $7::text, $8::int, coalesce($9::timestamptz, now())${SCHEDULED_VALUES}${traced[1]}
             from ${deliverAtFrom('$10::timestamptz', '$11::float8')}${wakeJoin(wake)}`,
    values,
  };
}

/**
 * Inserts many events of which some are delayed, in one statement; `seq` keeps their order. Those not delayed
 * are written as `insertEvents` writes them.
 */
export function insertScheduledEvents(
  n: OutboxNames,
  rows: readonly EventRow[],
  wake?: string,
): SqlStatement {
  const traced = rows.some((r) => r.traceparent);
  const t = traced ? [', traceparent', ', $12::text[]', ', traceparent'] : ['', '', ''];
  // as in insertScheduledEvent: the undelayed insert's nine arrays, then the delays'
  const values = [
    ...eventArrays(rows),
    rows.map((r) => r.deliverAt ?? null),
    rows.map((r) => r.delayMs ?? null),
    ...(traced ? [rows.map((r) => r.traceparent ?? null)] : []),
  ];
  return {
    text: `${carrying(n, values, wake)}insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${SCHEDULED_COLUMNS}${t[0]})
           select id, tenant_id, event_name, payload::jsonb, aggregate_type, aggregate_id, correlation_id, schema_version, coalesce(occurred_at, now())${SCHEDULED_VALUES}${t[2]}
             from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::timestamptz[], $10::timestamptz[], $11::float8[]${t[1]})
               with ordinality as t(id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at, deliver_at, delay_ms${t[0]}, n)
             cross join lateral ${deliverAtFrom('t.deliver_at', 't.delay_ms')}${wakeJoin(wake)}
            order by n`,
    values,
  };
}
