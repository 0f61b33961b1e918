import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import {
  deliverAtFrom,
  eventArrays,
  eventValues,
  isDelayed,
  SCHEDULED_COLUMNS,
  SCHEDULED_VALUES,
  withDelay,
  withTrace,
  type EventRow,
} from './enqueue';
import type { ValidatedDedupe } from '../../model/event-validation';

/** One input row of `insertKeyedEvents`: the event that holds its key (its own when it was written). */
export interface KeyedEventRow {
  /** The input event's id. */
  id: string;
  /** The event holding the input's key; null for an input without a key (written). */
  held_by: string | null;
}

/**
 * Inserts events of which some carry an idempotency key (`dedupe`), in one statement: each key is taken with
 * `outbox_dedupe_take`, and an event is written only when its key came back naming it (or it has no key). The
 * function inserts a free key's row (or takes over an expired one) in the caller's transaction, so a second
 * transaction enqueuing the same key waits on the primary key until the first ends, then reads its row — exactly
 * one event commits, whichever transaction commits first, and if the first rolls back the second writes its own.
 * A key held already is only read: nothing is written or locked, so enqueues of a held key do not wait for each
 * other, and REPEATABLE READ gets the holder as READ COMMITTED does (migration OutboxDedupeTake1764502000000
 * says why a function). Keys are taken in (tenant, name, key) order (PostgreSQL evaluates a volatile function of
 * the select list after the sort), so two calls with several keys in common cannot deadlock on them. The caller
 * passes each key at most once. See docs/adr/1103-idempotency-keys.md.
 */
export function insertKeyedEvents(n: OutboxNames, rows: readonly EventRow[]): SqlStatement {
  // tracing: as in insertEvents, the column only when a trace context was captured
  const traced = rows.some((r) => r.traceparent);
  // delayed events (any of them): as in insertScheduledEvents, their two arrays and columns
  const delayed = rows.some(isDelayed);
  const t = traced ? [', traceparent', `, $${delayed ? 14 : 12}::text[]`] : ['', ''];
  const d = delayed
    ? [', deliver_at, delay_ms', ', $12::timestamptz[], $13::float8[]', SCHEDULED_COLUMNS, SCHEDULED_VALUES]
    : ['', '', '', ''];
  return {
    text: `with input as (
    select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::timestamptz[], $10::text[], $11::float8[]${d[1]}${t[1]})
      with ordinality as t(id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at, dedupe_key, window_ms${d[0]}${t[0]}, n)
  ), taken as (
    select tenant_id, event_name, dedupe_key, ${n.dedupeTake}(tenant_id, event_name, dedupe_key, id, window_ms) as event_id
      from input where dedupe_key is not null
     order by tenant_id, event_name, dedupe_key
  ), written as (
    insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${d[2]}, dedupe_key${t[0]})
    select id, tenant_id, event_name, payload::jsonb, aggregate_type, aggregate_id, correlation_id, schema_version, coalesce(occurred_at, now())${d[3]}, dedupe_key${t[0]}
      from input i${delayed ? ` cross join lateral ${deliverAtFrom('i.deliver_at', 'i.delay_ms')}` : ''}
     where i.dedupe_key is null or i.id in (select event_id from taken)
     order by n
  )
  select i.id, k.event_id as held_by
    from input i left join taken k
      on k.tenant_id = i.tenant_id and k.event_name = i.event_name and k.dedupe_key = i.dedupe_key
   order by i.n`,
    values: [
      // the event columns' arrays as insertEvents sends them (without the trace context, which comes last here)
      ...eventArrays(rows),
      rows.map((r) => r.dedupe?.key ?? null),
      rows.map((r) => r.dedupe?.windowMs ?? null),
      ...(delayed ? [rows.map((r) => r.deliverAt ?? null), rows.map((r) => r.delayMs ?? null)] : []),
      ...(traced ? [rows.map((r) => r.traceparent ?? null)] : []),
    ],
  };
}

/**
 * `insertKeyedEvents` for one keyed event (the common case): the same statement over scalar parameters instead of
 * arrays, which the driver sends and PostgreSQL plans for less (ADR 1103). A free key, the common case of the
 * common case, is inserted inline (`on conflict do nothing`): `outbox_dedupe_take` runs only when the key is
 * there already, and then reads it (ADR 1103, "Amended 2026-12-06", measured the call).
 */
export function insertKeyedEvent(n: OutboxNames, e: EventRow & { dedupe: ValidatedDedupe }): SqlStatement {
  // tracing: as in insertEvent, the column only when there is a trace context
  // a delayed event: as in insertScheduledEvent, its two values and columns
  const delayed = isDelayed(e);
  const traced = e.traceparent ? [', traceparent', `, $${delayed ? 14 : 12}::text`] : ['', ''];
  const d = delayed
    ? [
        SCHEDULED_COLUMNS,
        SCHEDULED_VALUES,
        `
      from ${deliverAtFrom('$12::timestamptz', '$13::float8')}`,
      ]
    : ['', '', ''];
  return {
    text: `with inserted as (
    insert into ${n.dedupeKeys} (tenant_id, event_name, dedupe_key, event_id, expires_at)
    values ($2::uuid, $3::text, $10::text, $1::uuid, now() + $11::float8 * interval '1 millisecond')
    on conflict (tenant_id, event_name, dedupe_key) do nothing
    returning event_id
  ), taken as (
    select coalesce((select event_id from inserted),
                    ${n.dedupeTake}($2::uuid, $3::text, $10::text, $1::uuid, $11::float8)) as event_id
  ), written as (
    insert into ${n.events} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${d[0]}, dedupe_key${traced[0]})
    select $1::uuid, $2::uuid, $3::text, $4::jsonb, $5::text, $6::text, $7::text, $8::int, coalesce($9::timestamptz, now())${d[1]}, $10::text${traced[1]}${d[2]}
     where (select event_id from taken) = $1::uuid
  )
  select $1::uuid as id, event_id as held_by from taken`,
    values: withTrace(keyedValues(e, delayed), e),
  };
}

/** One row of `replaceKeyedPayloads`. */
export interface ReplacedPayloadRow {
  id: string;
  replaced: boolean;
}

/**
 * Replaces the payload (and schema version) of keyed events no relay has claimed yet: `outbox_dedupe_replace`
 * locks each pending or scheduled (delayed, not yet due) event, then looks for its lease (migration

 * OutboxDedupeKeys1764501900000 says why in that order). `replaced` is false for an event that was claimed already:
 * its payload is kept. A row with mode `'debounce'` also moves the event's `deliver_at` to its own delay's time
 * (as `insertScheduledEvent` computes it), and only while the event is still `scheduled`.
 */
export function replaceKeyedPayloads(n: OutboxNames, rows: readonly EventRow[]): SqlStatement {
  const debounce = rows.map((r) => r.dedupe?.mode === 'debounce');
  return {
    text: `select r.id, ${n.dedupeReplace}(r.id, r.payload::jsonb, r.schema_version, d.at) as replaced
             from unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[], $5::float8[])
                    as r(id, payload, schema_version, deliver_at, delay_ms)
            cross join lateral ${deliverAtFrom('r.deliver_at', 'r.delay_ms')}`,
    values: [
      rows.map((r) => r.id),
      rows.map((r) => r.payloadJson),
      rows.map((r) => r.schemaVersion),
      rows.map((r, i) => (debounce[i] ? (r.deliverAt ?? null) : null)),
      rows.map((r, i) => (debounce[i] ? (r.delayMs ?? null) : null)),
    ],
  };
}

/** The keyed insert's values before its trace context: the event's nine, its key and window, then its delay's two. */
function keyedValues(e: EventRow & { dedupe: ValidatedDedupe }, delayed: boolean): unknown[] {
  const values = eventValues(e);
  values.push(e.dedupe.key, e.dedupe.windowMs);
  return delayed ? withDelay(values, e) : values;
}
