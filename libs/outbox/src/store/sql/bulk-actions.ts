/**
 * Replay and purge of everything of one tenant that matches a filter, in chunks: each chunk is its own short
 * transaction (the operator's admin lock, then these statements) that takes the next `chunkSize` targets after
 * the last one done (keyset on the id, so a target that fails again is not taken twice), and says where it
 * stopped. The dry run counts with the same conditions. The rest of each statement is the single replay's and
 * purge's (`resetTargets`, `deleteDoomed` in admin.ts): the same locking order, so no deadlock with the relay.
 * Only the conditions of the filter's fields are in the text (never their values). Measured on 100k events:
 * docs/adr/1013-search-bulk-actions-and-hours-of-activity.md.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import { deleteDoomed, resetTargets } from './admin';

/** What a bulk action applies to (null: any). */
export interface BulkFilter {
  tenantId: string;
  consumer: string | null;
  /** Delivery statuses replayed: `dead`, `failed` (retrying) or both. A purge takes dead ones only. */
  statuses: readonly ('dead' | 'failed')[];
  eventName: string | null;
  /** Events created at or after `from`, and before `to`. */
  from: Date | null;
  to: Date | null;
}

/** Where a chunk starts (after this id; null: from the first) and how many it takes. */
export interface BulkChunk {
  afterId: string | null;
  chunkSize: number;
}

/** The conditions of a filter, on deliveries `d` (replay) or on failed events `e` (purge), and their values. */
function conditions(n: OutboxNames, p: BulkFilter, on: 'deliveries' | 'events', values: unknown[]): string[] {
  const param = (value: unknown, cast: string) => {
    values.push(value);
    return `$${values.length}::${cast}`;
  };
  const where: string[] = [];
  if (on === 'deliveries') {
    where.push(
      `d.tenant_id = $1 and d.status = any(${param(p.statuses, 'text[]')}) and d.status <> 'delivered'`,
    );
    if (p.consumer !== null) where.push(`d.consumer_name = ${param(p.consumer, 'text')}`);
  } else {
    where.push(`e.tenant_id = $1 and e.status = 'failed' and e.deliveries_open = 0`);
    if (p.consumer !== null)
      where.push(
        `exists (select 1 from ${n.deliveries} d where d.event_id = e.id and d.tenant_id = $1 ` +
          `and d.consumer_name = ${param(p.consumer, 'text')} and d.status = 'dead')`,
      );
  }
  if (p.eventName !== null) where.push(`e.event_name = ${param(p.eventName, 'text')}`);
  if (p.from !== null) where.push(`e.created_at >= ${param(p.from, 'timestamptz')}`);
  if (p.to !== null) where.push(`e.created_at < ${param(p.to, 'timestamptz')}`);
  return where;
}

/** Deliveries `d` (with their event `e` when the filter names the event) matching the filter. */
function matchingDeliveries(n: OutboxNames, p: BulkFilter, values: unknown[]): string {
  const where = conditions(n, p, 'deliveries', values);
  const join = p.eventName !== null || p.from !== null || p.to !== null;
  return `${n.deliveries} d${join ? ` join ${n.events} e on e.id = d.event_id and e.tenant_id = $1` : ''}
            where ${where.join(' and ')}`;
}

/** Failed events `e` with nothing open, matching the filter. */
function matchingEvents(n: OutboxNames, p: BulkFilter, values: unknown[]): string {
  const where = conditions(n, p, 'events', values);
  return `${n.events} e where ${where.join(' and ')}`;
}

/** The dry run of a bulk replay: how many deliveries it would reset now. */
export function countReplayable(n: OutboxNames, p: BulkFilter): SqlStatement {
  const values: unknown[] = [p.tenantId];
  return { text: `select count(*)::int as count from ${matchingDeliveries(n, p, values)}`, values };
}

/** The dry run of a bulk purge: how many events it would delete now. */
export function countPurgeable(n: OutboxNames, p: BulkFilter): SqlStatement {
  const values: unknown[] = [p.tenantId];
  return { text: `select count(*)::int as count from ${matchingEvents(n, p, values)}`, values };
}

/**
 * One chunk of a bulk replay: the next `chunkSize` matching deliveries by id, locked (`for update`, as the single
 * replay), reset. Returns how many were reset and the last delivery id taken (null: none left).
 */
export function replayChunk(n: OutboxNames, p: BulkFilter & BulkChunk): SqlStatement {
  const values: unknown[] = [p.tenantId];
  const from = matchingDeliveries(n, p, values);
  const after = p.afterId === null ? '' : `and d.id > $${values.push(p.afterId)}::bigint`;
  values.push(p.chunkSize);
  return {
    text: `with targets as (
             select d.id, d.status = 'dead' as was_dead from ${from} ${after}
              order by d.id
              limit $${values.length}::int
                for update of d
           ), ${resetTargets(n)}
           select (select count(*) from reset)::int as done, (select max(id) from targets)::text as last_id`,
    values,
  };
}

/**
 * One chunk of a bulk purge: the next `chunkSize` matching failed events by id (nothing open: the relay never
 * locks their rows), locked, deleted with their rows. Returns how many and the last event id taken.
 */
export function purgeChunk(n: OutboxNames, p: BulkFilter & BulkChunk): SqlStatement {
  const values: unknown[] = [p.tenantId];
  const from = matchingEvents(n, p, values);
  const after = p.afterId === null ? '' : `and e.id > $${values.push(p.afterId)}::uuid`;
  values.push(p.chunkSize);
  return {
    text: `with doomed as (
             select e.id from ${from} ${after}
              order by e.id
              limit $${values.length}::int
                for update of e
           ), ${deleteDoomed(n)}
           select count(*)::int as done, (select d.id from doomed d order by d.id desc limit 1)::text as last_id
             from events`,
    values,
  };
}
