import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * A delivery's rate key, for a consumer `lim` limited per key and its event `ke`: the md5 of the value
 * `outbox_consumers.rate_key` names — `'aggregate'`, the event's aggregate type and id; `'payload:<path>'`, that
 * payload field's text —, an event with none (no aggregate, no such field) under one key of its own.
 */
const RATE_KEY = `md5(coalesce(case when lim.rate_key = 'aggregate'
                                    then json_build_array(ke.aggregate_type, ke.aggregate_id)::text
                                    else ke.payload #>> string_to_array(substr(lim.rate_key, 9), '.') end, ''))::uuid`;

/**
 * The due claim's part for consumers limited per key (`rateLimit.perKey`), after `limitedClaimParts` (whose `lim`
 * gives each limited consumer its room from its other limits) and in the same turn (`lockConsumerLimits` locks
 * the tenant's row for a keyed consumer, so the claims of one consumer in one tenant take turns and the counts
 * below are exact): `key_used`, the starts of each key in the tenant's log for the last interval; its stale then
 * due rows, passing by those of keys at their limit (as by a paused pair's) so a busy key holds no other back;
 * `keyed`, those kept — at most the key's room per key, at most the consumer's room in all, oldest first; and the
 * log written: the claim's starts per key appended, the tenant's rows older than the interval deleted (a key's
 * rows go once its window passed: the log holds at most one interval of claims). Ordered consumers keep the
 * ordered rule: a limit only delays. Parameters: those of `limitedClaimParts`.
 * See docs/adr/1104-consumer-limits-in-the-database.md ("Amended 2026-12-06: per key").
 */
export function keyedClaimParts(
  n: OutboxNames,
  due: { notPaused: (d: string) => string; ordered: string },
): string {
  const within = `clock_timestamp() - lim.rate_interval_ms * interval '1 millisecond'`;
  // an uncorrelated `not in`: a hashed subplan, built once, so a row's key is looked up at once whatever the
  // number of keys at their limit (a correlated `not exists` was joined in a nested loop: rows × keys, 25 s a
  // claim for 20,000 due rows of 1,000 keys)
  const keyHasRoom = `(lim.name, ${RATE_KEY}) not in (select name, rate_key from key_full)`;
  return `key_used as materialized (
             select s.consumer_name as name, s.rate_key, sum(s.n)::int as used
               from lim join ${n.consumerKeyStarts} s on s.consumer_name = lim.name and s.tenant_id = $1
              where lim.rate_key is not null and s.started_at > ${within}
              group by s.consumer_name, s.rate_key
           ), key_full as materialized (
             select u.name, u.rate_key from key_used u join lim on lim.name = u.name where u.used >= lim.rate_limit
           ), keyed_stale as (
             select s.id, lim.name, s.rate_key, true as recovered, s.lease_expires_at as due_at from lim, lateral (
               select s.id, s.lease_expires_at, ${RATE_KEY} as rate_key
                 from ${n.deliveries} s join ${n.events} ke on ke.id = s.event_id
                where s.tenant_id = $1 and s.status = 'processing' and s.lease_expires_at <= now()
                  and s.consumer_name = lim.name and ${due.notPaused('s')} and ${keyHasRoom}
                order by s.lease_expires_at
                limit lim.room
                  for update of s skip locked) s
              where lim.rate_key is not null
           ), keyed_retry as (
             select d.id, lim.name, d.rate_key, false as recovered, d.next_attempt_at as due_at from lim, lateral (
               select d.id, d.next_attempt_at, ${RATE_KEY} as rate_key
                 from ${n.deliveries} d join ${n.events} ke on ke.id = d.event_id
                where d.tenant_id = $1 and d.status in ('pending', 'failed') and d.next_attempt_at <= now()
                  and d.consumer_name = lim.name and ${due.notPaused('d')} and ${keyHasRoom}
                  and (d.aggregate_key is null or not exists (${due.ordered}))
                order by d.next_attempt_at
                limit lim.room
                  for update of d skip locked) d
              where lim.rate_key is not null
           ), keyed as (
             select x.id, x.name, x.rate_key, x.recovered from (
               select k.*, row_number() over (partition by k.name order by k.recovered desc, k.due_at) as nth
                 from (select f.*, lim.room, lim.rate_limit - coalesce(u.used, 0) as key_room,
                              row_number() over (partition by f.name, f.rate_key
                                                 order by f.recovered desc, f.due_at) as nth_of_key
                         from (select * from keyed_stale union all select * from keyed_retry) f
                         join lim on lim.name = f.name
                         left join key_used u on u.name = f.name and u.rate_key = f.rate_key) k
                where k.nth_of_key <= k.key_room) x
              where x.nth <= x.room
           ), keyed_pruned as (
             delete from ${n.consumerKeyStarts} s using lim
              where lim.rate_key is not null and s.consumer_name = lim.name and s.tenant_id = $1
                and s.started_at <= ${within}
           ), keyed_started as (
             insert into ${n.consumerKeyStarts} as s (consumer_name, tenant_id, rate_key, started_at, n)
             select name, $1, rate_key, clock_timestamp(), count(*)::int from keyed group by name, rate_key
             on conflict (consumer_name, tenant_id, started_at, rate_key) do update set n = s.n + excluded.n
           )`;
}

/**
 * Retention of the per-key rate logs: up to `batchSize` rows whose window has passed (or whose consumer is no
 * longer limited per key, or gone) — what claims leave behind in a tenant that gets no more events, where no
 * claim of the consumer prunes them. Rows a claim holds are passed by (`skip locked`): retention never waits for a
 * claim, so the two cannot wait on each other in a cycle. Returns the rows deleted.
 */
export function purgeKeyStarts(n: OutboxNames, batchSize: number): SqlStatement {
  return {
    text: `with old as (
             select s.ctid as row_id from ${n.consumerKeyStarts} s
               left join ${n.consumers} c on c.name = s.consumer_name and c.rate_key is not null
              where c.name is null or s.started_at <= now() - c.rate_interval_ms * interval '1 millisecond'
              limit $1
                for update of s skip locked
           )
           delete from ${n.consumerKeyStarts} s using old where s.ctid = old.row_id`,
    values: [batchSize],
  };
}
