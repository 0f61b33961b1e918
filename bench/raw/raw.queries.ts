/**
 * The raw-SQL baselines: what a careful engineer would write by hand with `pg` on the same tables, with no
 * library around it. Each statement is a `{ text, values }`, like the library's own `store/sql/`.
 */
import { INSERT_EFFECT_SQL } from '../harness/bench-consumers';

/** A statement for `client.query(text, values)`. */
export interface SqlStatement {
  text: string;
  values: unknown[];
}

/** An event as a relay reads it. */
export interface RawEventRow {
  id: string;
  /** Insert order (bigint, as text). */
  seq: string;
  tenant_id: string;
  event_name: string;
  payload: unknown;
  aggregate_type: string | null;
  aggregate_id: string | null;
  occurred_at: Date;
  correlation_id: string | null;
  schema_version: number;
}

const EVENT_COLUMNS = `e.id, e.seq, e.tenant_id, e.event_name, e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at,
  e.correlation_id, e.schema_version`;

// --- the business transaction -------------------------------------------------------------------------------

export function insertContact(id: string, tenantId: string, name: string, email: string): SqlStatement {
  return {
    text: 'insert into public.contacts (id, tenant_id, name, email) values ($1, $2, $3, $4)',
    values: [id, tenantId, name, email],
  };
}

/** The same row `OutboxService.enqueue` writes, as a hand-written INSERT. */
export function insertEvent(e: {
  id: string;
  tenantId: string;
  eventName: string;
  payloadJson: string;
  aggregateType: string;
  aggregateId: string;
}): SqlStatement {
  return {
    text: `insert into public.event_outbox (id, tenant_id, event_name, payload, aggregate_type, aggregate_id)
           values ($1, $2, $3, $4::jsonb, $5, $6)`,
    values: [e.id, e.tenantId, e.eventName, e.payloadJson, e.aggregateType, e.aggregateId],
  };
}

export function notify(channel: string): SqlStatement {
  return { text: 'select pg_notify($1, $2)', values: [channel, ''] };
}

// --- the batched relay: one claim-record-mark transaction per batch ---------------------------------------------

/**
 * Claims a tenant's oldest pending events; `skip locked` lets several relays claim side by side. Per tenant, as
 * the library and the reference do: the equality on `tenant_id` is what lets the pending index
 * `(tenant_id, seq)` return rows already in order, instead of sorting every pending row on each claim.
 */
export function claimPendingEvents(tenantId: string, limit: number): SqlStatement {
  return {
    text: `with ev as (
             select id from public.event_outbox
              where tenant_id = $1 and status = 'pending'
              order by seq
              limit $2
                for update skip locked
           )
           select ${EVENT_COLUMNS} from public.event_outbox e join ev on ev.id = e.id order by e.seq`,
    values: [tenantId, limit],
  };
}

/** Records a handled batch in one statement: a delivered delivery row and an inbox row per (event, consumer), events published. */
export function recordBatch(events: readonly RawEventRow[], consumers: readonly string[]): SqlStatement {
  return {
    text: `with ev as (
             select * from unnest($1::uuid[], $2::uuid[], $3::bigint[]) as ev(id, tenant_id, seq)
           ), deliveries as (
             insert into public.outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, processed_at)
             select ev.id, ev.tenant_id, k.name, ev.seq, 'delivered', 1, now() from ev cross join unnest($4::text[]) as k(name)
           ), inbox as (
             insert into public.consumer_inbox (event_id, consumer_name, tenant_id)
             select ev.id, k.name, ev.tenant_id from ev cross join unnest($4::text[]) as k(name)
           )
           update public.event_outbox e
              set status = 'published', attempts = 1, deliveries_open = 0, published_at = now(), updated_at = now()
             from ev where e.id = ev.id`,
    values: [events.map((e) => e.id), events.map((e) => e.tenant_id), events.map((e) => e.seq), consumers],
  };
}

export function insertEffect(eventId: string, consumer: string): SqlStatement {
  return { text: INSERT_EFFECT_SQL, values: [eventId, consumer] };
}

// --- the reference CRM's per-event pattern (seeds/000: process_outbox_batch) ----------------------------------

export function crmSetTenant(tenantId: string): SqlStatement {
  return { text: `select set_config('app.current_tenant_id', $1, true)`, values: [tenantId] };
}

/** The reference's claim; its row-level security policy adds `tenant_id = <current tenant>`, written out here. */
export function crmClaimEvents(tenantId: string, limit: number): SqlStatement {
  return {
    text: `update public.event_outbox set status = 'processing', updated_at = now()
            where id in (select id from public.event_outbox
                          where tenant_id = $1 and status = 'pending'
                          order by seq
                          limit $2
                            for update skip locked)
           returning id, seq, tenant_id, event_name, payload, attempts, aggregate_type, aggregate_id, occurred_at,
                     correlation_id, schema_version`,
    values: [tenantId, limit],
  };
}

export function crmDeliveredConsumers(eventId: string): SqlStatement {
  return {
    text: `select consumer_name from public.outbox_deliveries where event_id = $1 and status = 'delivered'`,
    values: [eventId],
  };
}

export function crmUpsertDelivery(event: RawEventRow, consumer: string): SqlStatement {
  return {
    text: `insert into public.outbox_deliveries
             (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, last_error, processed_at)
           values ($1, $2, $3, $4, 'delivered', 1, null, now())
           on conflict (event_id, consumer_name) do update set
             status = excluded.status, attempt_count = excluded.attempt_count, last_error = excluded.last_error,
             processed_at = excluded.processed_at, updated_at = now()`,
    values: [event.id, event.tenant_id, consumer, event.seq],
  };
}

export function crmInsertInbox(eventId: string, consumer: string, tenantId: string): SqlStatement {
  return {
    text: `insert into public.consumer_inbox (event_id, consumer_name, tenant_id) values ($1, $2, $3) on conflict do nothing`,
    values: [eventId, consumer, tenantId],
  };
}

export function crmMarkPublished(eventId: string): SqlStatement {
  return {
    text: `update public.event_outbox set status = 'published', published_at = now(), updated_at = now() where id = $1`,
    values: [eventId],
  };
}
