/**
 * The statements of the test kit (`nestjs-pg-outbox/testing`), as `{ text, values }`. Each takes an optional
 * tenant: the kit runs them under that tenant's row-level security context when the app's role needs one, and
 * names it in `where` too, so a connection that bypasses RLS sees that tenant only.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** A row of `enqueuedEvents`. */
export interface EnqueuedEventRow {
  id: string;
  tenant_id: string;
  event_name: string;
  payload: unknown;
  aggregate_type: string | null;
  aggregate_id: string | null;
  occurred_at: Date;
  correlation_id: string | null;
  schema_version: number;
  status: string;
  /** A delayed event's instant (null for others). */
  deliver_at: Date | null;
}

/** The committed events of a name (every name when null), in enqueue order. */
export function enqueuedEvents(
  n: OutboxNames,
  eventName: string | null,
  tenantId: string | null,
): SqlStatement {
  return {
    text: `select id, tenant_id, event_name, payload, aggregate_type, aggregate_id, occurred_at, correlation_id,
                  schema_version, status, deliver_at
             from ${n.events}
            where ($1::text is null or event_name = $1) and ($2::uuid is null or tenant_id = $2)
            order by seq`,
    values: [eventName, tenantId],
  };
}

/** A row of `eventDeliveries`. */
export interface EventDeliveryRow {
  consumer_name: string;
  status: string;
  attempt_count: number;
  error_code: string | null;
  last_error: string | null;
  next_attempt_at: Date;
  processed_at: Date | null;
}

/** The delivery rows of one event, by consumer name. */
export function eventDeliveries(n: OutboxNames, eventId: string, tenantId: string | null): SqlStatement {
  return {
    text: `select consumer_name, status, attempt_count, error_code, last_error, next_attempt_at, processed_at
             from ${n.deliveries}
            where event_id = $1 and ($2::uuid is null or tenant_id = $2)
            order by consumer_name`,
    values: [eventId, tenantId],
  };
}

/**
 * Makes the retries that backoff scheduled for later due now, so a drain runs them at once instead of the test
 * waiting out the backoff (or faking the clock the relay's SQL reads: it uses the database's `now()`). Returns
 * how many.
 */
export function makeRetriesDue(n: OutboxNames, tenantId: string | null): SqlStatement {
  return {
    text: `with due as (
             update ${n.deliveries} set next_attempt_at = now()
              where status = 'failed' and next_attempt_at > now() and ($1::uuid is null or tenant_id = $1)
             returning 1)
           select count(*)::int as made_due from due`,
    values: [tenantId],
  };
}
