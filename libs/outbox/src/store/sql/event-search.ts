/**
 * The operator's search for events of one tenant, newest first (ids are UUIDv7), a page at a time: keyset
 * pagination on the id, never an offset. Each field has an index that starts with the tenant and the field and
 * ends with the id (migration OutboxEventSearch1764501500000), so a page is one index range walked backwards and
 * stopped at `limit`, whatever the size of the history: `event_outbox_pkey` for the event id,
 * `event_outbox_aggregate_idx` (tenant, aggregate id, type, id), `event_outbox_correlation_idx` and
 * `event_outbox_name_idx`. Only the conditions of the fields given are in the text (never their values), so the
 * planner sees no `$n is null or …` that would hide the index from a generic plan. Plans measured on 100k events:
 * docs/adr/1013-search-bulk-actions-and-hours-of-activity.md.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** The fields searched (null: any) and the page: events older than `beforeId`, at most `limit`. */
export interface EventSearch {
  tenantId: string;
  eventId: string | null;
  aggregateType: string | null;
  aggregateId: string | null;
  correlationId: string | null;
  eventName: string | null;
  beforeId: string | null;
  limit: number;
}

/** One event found. */
export interface EventSearchRow {
  id: string;
  event_name: string;
  status: string;
  aggregate_type: string | null;
  aggregate_id: string | null;
  correlation_id: string | null;
  created_at: Date;
  deliveries_open: number;
  deliveries_dead: number;
}

export function searchEvents(n: OutboxNames, p: EventSearch): SqlStatement {
  const values: unknown[] = [p.tenantId, p.limit];
  const where = ['e.tenant_id = $1'];
  const condition = (sql: (param: string) => string, value: string | null) => {
    if (value === null) return;
    values.push(value);
    where.push(sql(`$${values.length}`));
  };
  condition((v) => `e.id = ${v}::uuid`, p.eventId);
  condition((v) => `e.aggregate_id = ${v}::text`, p.aggregateId);
  condition((v) => `e.aggregate_type = ${v}::text`, p.aggregateType);
  condition((v) => `e.correlation_id = ${v}::text`, p.correlationId);
  condition((v) => `e.event_name = ${v}::text`, p.eventName);
  condition((v) => `e.id < ${v}::uuid`, p.beforeId);
  return {
    text: `select e.id, e.event_name, e.status, e.aggregate_type, e.aggregate_id, e.correlation_id, e.created_at,
                  e.deliveries_open, e.deliveries_dead
             from ${n.events} e
            where ${where.join(' and ')}
            order by e.id desc
            limit $2::int`,
    values,
  };
}
