/**
 * The statements of the operator's toolkit (stats, dead letters, replay, purge), as `{ text, values }`; retention's
 * are in `retention.ts`, the oldest pending reading in `pending-age.ts`. Every tenant-scoped statement names its tenant in `where` as well as running under the
 * row-level security context: a connection that bypasses RLS (owner, superuser) still sees one tenant only.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import { reopenedMark } from './claim-floor';

/** Sets the tenant for row-level security, transaction-local: nothing leaks to the pooled connection. */
export function setAdminTenant(tenantSetting: string, tenantId: string): SqlStatement {
  return { text: `select set_config($1, $2, true)`, values: [tenantSetting, tenantId] };
}

/**
 * Sets the tenant, and serialises the operator's writes (replay, purge) of this tenant with a transaction-level
 * advisory lock: a replay and a purge of the same event could otherwise lock its rows in opposite orders and
 * deadlock. The relay does not take this lock; see the statements below for why they cannot deadlock with it.
 */
export function setAdminTenantForWrite(
  n: OutboxNames,
  tenantSetting: string,
  tenantId: string,
): SqlStatement {
  return {
    text: `select set_config($1, $2, true), pg_advisory_xact_lock(hashtextextended('${n.adminLock}' || $2, 0))`,
    values: [tenantSetting, tenantId],
  };
}

/**
 * One tenant's counts: events per status, deliveries per consumer and status, the age of the oldest work not
 * done (pending events, pending or failed deliveries, delayed events due but not promoted), when its next delayed event is due, and the consumers named in delivery rows that no live
 * instance hosts (unknown to the registry, or not reported within `orphanAfterMs`), tenant-scoped consumers
 * excepted. The counts read every row of the tenant (there is no index on tenant alone, to keep the relay's
 * writes cheap): fine for an operator, not for a probe — the health check uses `oldestPendingAge`.
 */
export function tenantStats(
  n: OutboxNames,
  p: {
    tenantId: string;
    orphanAfterMs: number;
    tenantConsumers: readonly string[];
    /** Most blocked aggregates listed (all are counted). */
    blockedLimit: number;
  },
): SqlStatement {
  return {
    text: `with delivery_counts as (
             select consumer_name, status, count(*)::int as n from ${n.deliveries} where tenant_id = $1 group by consumer_name, status
           ), live as (
             select name from ${n.consumers} where last_seen_at > now() - $2 * interval '1 millisecond'
             union all
             select unnest($3::text[])
           ), blocked as (
             -- an ordered consumer's earliest dead delivery per aggregate: what holds the aggregate up
             select d.consumer_name, d.aggregate_key, d.event_id, d.event_seq from ${n.deliveries} d
              where d.tenant_id = $1 and d.status = 'dead' and d.aggregate_key is not null
                and not exists (select 1 from ${n.deliveries} p
                                 where p.tenant_id = $1 and p.consumer_name = d.consumer_name
                                   and p.aggregate_key = d.aggregate_key and p.status = 'dead' and p.event_seq < d.event_seq)
           )
           select coalesce((select json_object_agg(status, n)
                              from (select status, count(*)::int as n from ${n.events} where tenant_id = $1 group by status) s),
                           '{}'::json) as events,
                  coalesce((select json_agg(json_build_array(consumer_name, status, n)) from delivery_counts), '[]'::json) as deliveries,
                  array(select distinct d.consumer_name from delivery_counts d
                         where not exists (select 1 from live l where l.name = d.consumer_name)
                         order by d.consumer_name) as orphaned,
                  extract(epoch from now() - least(
                    -- a promoted delayed event waits from its deliver_at
                    (select min(greatest(created_at, deliver_at)) from ${n.events} where tenant_id = $1 and status = 'pending'),
                    (select min(created_at) from ${n.deliveries} where tenant_id = $1 and status in ('pending', 'failed')),
                    -- so does one due but not promoted (no relay ran since): work not done
                    (select min(deliver_at) from ${n.events} where tenant_id = $1 and status = 'scheduled' and deliver_at <= now())
                  ))::float8 as oldest_pending_age_seconds,
                  (select count(*)::int from blocked) as blocked_count,
                  (select min(deliver_at) from ${n.events} where tenant_id = $1 and status = 'scheduled') as next_delivery_at,
                  coalesce((select json_agg(b order by b.consumer, b.seq) from (
                              select k.consumer_name as consumer, e.aggregate_type as "aggregateType",
                                     e.aggregate_id as "aggregateId", k.event_id as "deadEventId", k.event_seq as seq,
                                     (select count(*)::int from ${n.deliveries} w
                                       where w.tenant_id = $1 and w.consumer_name = k.consumer_name
                                         and w.aggregate_key = k.aggregate_key and w.event_seq > k.event_seq
                                         and w.status <> 'delivered') as "waitingDeliveries"
                                from blocked k join ${n.events} e on e.id = k.event_id
                               order by k.consumer_name, k.event_seq
                               limit $4) b),
                           '[]'::json) as blocked`,
    values: [p.tenantId, p.orphanAfterMs, p.tenantConsumers, p.blockedLimit],
  };
}

/** Filters shared by the listing, replay and purge of failed work; null means "any". */
export interface FailedFilter {
  tenantId: string;
  consumer: string | null;
  eventName: string | null;
}

/**
 * One page of a tenant's failed events (some delivery dead), newest first, each with every consumer's
 * delivery state and last error, plus the total matching. `consumer` keeps the events dead for that consumer.
 * Walks `event_outbox_failed_idx` backwards.
 */
export function failedEventsPage(
  n: OutboxNames,
  p: FailedFilter & { limit: number; offset: number },
): SqlStatement {
  return {
    text: `with f as (
             select e.id, e.seq, e.failed_at from ${n.events} e
              where e.tenant_id = $1 and e.status = 'failed'
                and ($4::text is null or e.event_name = $4)
                and ($5::text is null or exists (select 1 from ${n.deliveries} d
                                                  where d.event_id = e.id and d.consumer_name = $5 and d.status = 'dead'))
           ), page as (
             select id, seq, failed_at from f order by failed_at desc nulls last, seq desc limit $2 offset $3
           )
           select (select count(*) from f)::int as total,
                  coalesce((
                    select json_agg(json_build_object(
                             'eventId', e.id, 'eventName', e.event_name, 'aggregateType', e.aggregate_type,
                             'aggregateId', e.aggregate_id, 'correlationId', e.correlation_id, 'occurredAt', e.occurred_at,
                             'createdAt', e.created_at, 'failedAt', e.failed_at, 'error', e.error_message,
                             'deliveries', (select json_agg(json_build_object(
                                                     'consumer', d.consumer_name, 'status', d.status, 'attempts', d.attempt_count,
                                                     'errorCode', d.error_code, 'lastError', d.last_error, 'updatedAt', d.updated_at)
                                                   order by d.consumer_name)
                                              from ${n.deliveries} d where d.event_id = e.id and d.tenant_id = $1))
                           order by p.failed_at desc nulls last, p.seq desc)
                      from page p join ${n.events} e on e.id = p.id
                  ), '[]'::json) as items`,
    values: [p.tenantId, p.limit, p.offset, p.eventName, p.consumer],
  };
}

/** One event of a tenant with the state of its delivery to each consumer (and when its inbox row was written). */
export function eventDeliveries(n: OutboxNames, tenantId: string, eventId: string): SqlStatement {
  return {
    text: `select e.id as event_id, e.event_name, e.status, e.payload, e.aggregate_type, e.aggregate_id, e.correlation_id,
                  e.schema_version, e.occurred_at, e.created_at, e.deliver_at, e.published_at, e.failed_at, e.error_message,
                  e.deliveries_open, e.deliveries_dead, e.dedupe_key,
                  coalesce((select json_agg(json_build_object(
                                     'consumer', d.consumer_name, 'status', d.status, 'attempts', d.attempt_count,
                                     'errorCode', d.error_code, 'lastError', d.last_error, 'nextAttemptAt', d.next_attempt_at,
                                     'leaseExpiresAt', d.lease_expires_at, 'processedAt', d.processed_at,
                                     'inboxAt', i.processed_at, 'externalRunId', d.external_run_id,
                                     'createdAt', d.created_at, 'updatedAt', d.updated_at)
                                   order by d.consumer_name)
                              from ${n.deliveries} d
                              -- the event's own tenant: another tenant's inbox may hold a message with this id
                              left join ${n.inbox} i on i.event_id = d.event_id and i.consumer_name = d.consumer_name
                                                    and i.tenant_id = d.tenant_id
                             where d.event_id = e.id and d.tenant_id = $1), '[]'::json) as deliveries
             from ${n.events} e
            where e.tenant_id = $1 and e.id = $2`,
    values: [tenantId, eventId],
  };
}

/**
 * Puts a tenant's dead and failed deliveries (of one event, or matching the filter) back to `pending`, due now,
 * attempts and snoozes reset; delivered, pending and in-flight deliveries are never touched. Each event's counters follow:
 * a dead delivery revived is open again, and the event is `processing` once none of its deliveries is dead.
 *
 * Locking: the deliveries are locked first and their event second, the relay's own order when it records
 * outcomes, so replay cannot deadlock with a relay. `for update` (no skip): a failed delivery that a relay is
 * claiming right now is waited for and then re-checked — once it is `processing` it is left alone.
 */
export function replayDeliveries(n: OutboxNames, p: FailedFilter & { eventId: string | null }): SqlStatement {
  return {
    text: `with targets as (
             select d.id, d.status = 'dead' as was_dead from ${n.deliveries} d
              where d.tenant_id = $1 and d.status in ('dead', 'failed')
                and ($2::uuid is null or d.event_id = $2)
                and ($3::text is null or d.consumer_name = $3)
                and ($4::text is null or exists (select 1 from ${n.events} e where e.id = d.event_id and e.event_name = $4))
              order by d.id
                for update of d
           ), ${resetTargets(n)}
           select (select count(*) from reset)::int as reset, (select count(*) from events)::int as events`,
    values: [p.tenantId, p.eventId, p.consumer, p.eventName],
  };
}

/**
 * Deletes a tenant's settled events (in `statuses`, and with no delivery still open) with their delivery rows and
 * the inbox rows the relay wrote for them; returns how many events. Only events with no open delivery: the relay
 * never locks their rows, so locking the event first cannot deadlock with it, and no inbox row goes while its
 * event could be redelivered. The relay's inbox rows are those with no `first_seen_at`: a broker message received
 * with the event's id (the event sent through a broker and received back) keeps the inbox's record of it, as
 * retention keeps it (migration `OutboxPurgeRelayInbox1764500800000`).
 */
export function purgeEvents(
  n: OutboxNames,
  p: FailedFilter & { eventId: string | null; statuses: readonly string[] },
): SqlStatement {
  return {
    text: `with doomed as (
             select e.id from ${n.events} e
              where e.tenant_id = $1 and e.status = any($2::text[]) and e.deliveries_open = 0
                and ($3::uuid is null or e.id = $3)
                and ($4::text is null or e.event_name = $4)
                and ($5::text is null or exists (select 1 from ${n.deliveries} d
                                                  where d.event_id = e.id and d.consumer_name = $5 and d.status = 'dead'))
                for update of e
           ), ${deleteDoomed(n)}
           select count(*)::int as purged from events`,
    values: [p.tenantId, p.statuses, p.eventId, p.eventName, p.consumer],
  };
}

/**
 * The rest of a replay after its `targets` (delivery `id`s locked, `was_dead`): `reset` puts them back to pending,
 * due now, attempts and snoozes reset, and `events` moves each event's counters (a dead delivery revived is open again; the
 * event is `processing` once none of its deliveries is dead); `reopened` tells the claims' floor where (a dead
 * delivery's range may lie below its open floor: `reopenedMark`). Shared by `replayDeliveries` and the bulk replay.
 */
export function resetTargets(n: OutboxNames): string {
  return `reset as (
             update ${n.deliveries} d
                -- snoozes too: maxSnoozes bounds a run of the delivery, and a replay starts one (ADR 1105)
                set status = 'pending', attempt_count = 0, snoozes = 0, next_attempt_at = now(),
                    lease_token = null, lease_expires_at = null, updated_at = now()
               from targets t
              where d.id = t.id
             returning d.event_id, t.was_dead
           ), per_event as (
             select event_id, count(*) filter (where was_dead)::int as revived from reset group by event_id
           ), events as (
             update ${n.events} e
                set deliveries_dead = e.deliveries_dead - p.revived,
                    deliveries_open = e.deliveries_open + p.revived,
                    status = case when e.deliveries_dead - p.revived > 0 then 'failed' else 'processing' end,
                    failed_at = case when e.deliveries_dead - p.revived > 0 then e.failed_at end,
                    updated_at = now()
               from per_event p
              where e.id = p.event_id and p.revived > 0
             returning e.id
           ), ${reopenedMark(n, 'reset')}`;
}

/**
 * The rest of a purge after its `doomed` events (ids locked, in tenant `$1`): their relay-written inbox rows,
 * delivery rows and the events themselves; `events` returns one row per event deleted. Shared by `purgeEvents`
 * and the bulk purge.
 */
export function deleteDoomed(n: OutboxNames): string {
  return `inbox as (
             delete from ${n.inbox} i using doomed
              where i.event_id = doomed.id and i.tenant_id = $1 and i.first_seen_at is null
           ), deliveries as (
             delete from ${n.deliveries} d using doomed where d.event_id = doomed.id and d.tenant_id = $1
           ), events as (
             delete from ${n.events} e using doomed where e.id = doomed.id returning 1
           )`;
}

/**
 * Removes a consumer from the persisted registry (so fan-out stops creating its rows) unless an instance
 * reported it within `orphanAfterMs`; says whether it was found, live, and deleted. Not tenant-scoped: the
 * registry is shared.
 */
export function forgetConsumer(n: OutboxNames, name: string, orphanAfterMs: number): SqlStatement {
  return {
    text: `with target as (
             select name, last_seen_at > now() - $2 * interval '1 millisecond' as live from ${n.consumers} where name = $1
           ), deleted as (
             delete from ${n.consumers} c using target t where c.name = t.name and not t.live returning 1
           )
           select (select count(*) from target)::int as found, coalesce((select live from target), false) as live,
                  (select count(*) from deleted)::int as deleted`,
    values: [name, orphanAfterMs],
  };
}
