import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A second form of `outbox_oldest_pending_age`, from positions (docs/adr/1206-claims-that-start-past-the-settled.md,
 * addendum "The oldest pending reading starts past the settled"). The one-argument form finds each tenant's oldest
 * pending event from the tenant's first entry of `event_outbox_pending_idx`; while a snapshot is held, that index
 * keeps an entry for every event settled since (a settle changes `status`, so it is never HOT), and each reading
 * walked them all: 0.8–1.2 s and 223k–315k buffers per call at the end of a 10-minute hold at 400 events/s.
 *
 * This form probes each tenant it is given from its position (`seq >= position`), finds the other tenants between
 * them (a tenant found gets position 0), and returns the positions the caller passes to its next reading. A
 * position moves only to a candidate of the previous reading that is proven, so that the answer stays the
 * one-argument form's: the candidate is the lowest pending `seq` that reading saw (else the sequence's next
 * value), and it is proven when every transaction that could still commit an event below it has ended — those
 * that held `event_outbox` for writing after that reading's snapshot no longer run (`pg_locks`, read before this
 * reading's snapshot), and those that had a transaction id at it have ended (its `xmax` at or below this
 * snapshot's `xmin`). An event becomes pending only at its insert or at a promotion, which gives it a new `seq`,
 * so nothing below a proven candidate can be pending again. Positions read on another server, or a call inside a
 * transaction of one snapshot (repeatable read, serializable), start from 0: the one-argument form's walk.
 *
 * The one-argument form stays (relays of older releases). Frozen history: literal SQL.
 */
export class OutboxOldestPendingFromPositions1764504200000 implements MigrationInterface {
  name = 'OutboxOldestPendingFromPositions1764504200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create function public.outbox_oldest_pending_age(orphaned_after interval, past_tenants uuid[],
                                                       past_seqs bigint[], candidate_seqs bigint[], candidate_xmax xid8,
                                                       candidate_holders text[], positions_server text)
      returns table (seconds double precision, tenants uuid[], positions bigint[], candidates bigint[], xmax xid8,
                     holders text[], server text)
      language plpgsql volatile security definer set search_path = pg_catalog, public set jit = off as $$
      declare
        here text := (extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint::text;
        -- the statements below read snapshots taken one after the other (read committed); in a transaction of one
        -- snapshot, that snapshot may be older than the lock holders read here: no positions, as before
        positioned boolean := positions_server is not distinct from here
                              and current_setting('transaction_isolation') = 'read committed';
        ended boolean;
        probed record;
        last_seq bigint;
        outbox_tables oid[];
      begin
        if not positioned then
          past_tenants := '{}';
          past_seqs := '{}';
          candidate_seqs := null;
        end if;
        -- the events table, its partitions, and its sequence (nextval takes its lock for the transaction)
        select array['public.event_outbox'::regclass::oid,
                     pg_get_serial_sequence('public.event_outbox', 'seq')::regclass::oid]
               || coalesce(array_agg(t.relid), '{}')
          into outbox_tables from pg_partition_tree('public.event_outbox'::regclass) t;
        -- the candidates of the previous reading: every transaction that could still commit an event below them has
        -- ended before this statement if those that held event_outbox for writing then (the candidates' holders) no
        -- longer run now, and (checked in the probe's snapshot) those that had a transaction id then have ended
        ended := candidate_seqs is not null and candidate_xmax is not null and not exists (
                   select 1 from pg_locks l
                    where l.locktype = 'virtualxid' and l.virtualxid = any(candidate_holders));
        with recursive fence(tenant_id, seq, candidate, prev) as (
          select k.t, k.s, k.c, lag(k.t) over (order by k.t) from (
            select a.t, max(a.s) as s, max(a.c) as c from (
              select u.t, u.s, u.c from unnest(past_tenants, past_seqs,
                                               coalesce(candidate_seqs, array_fill(null::bigint, array[cardinality(past_tenants)]))) as u(t, s, c)
              union all select '00000000-0000-0000-0000-000000000000'::uuid, 0, null
              union all select 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid, 0, null
              -- the tenants of the last events settled, from their start unless positioned: a tenant whose events
              -- are all settled between two readings has no pending entry to be found by, and the walk between the
              -- fences would pass its settled ones at every reading
              union all select r.tenant_id, 0, null from (
                select e.tenant_id from public.event_outbox e
                 where e.status in ('published', 'no_handlers') order by e.published_at desc limit 100) r
            ) a group by a.t) k
        ), gap(found, hi) as (
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > f.prev and e.tenant_id < f.tenant_id
                   order by e.tenant_id limit 1), f.tenant_id
            from fence f where f.prev is not null
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > g.found and e.tenant_id < g.hi
                   order by e.tenant_id limit 1), g.hi
            from gap g where g.found is not null
        ), probe as (
          select t.tenant_id, t.seq, t.candidate, o.seq as lowest, o.at from (
            select f.tenant_id, f.seq, f.candidate from fence f
            union all select g.found, 0, null from gap g where g.found is not null
          ) t left join lateral (
            select e.seq, greatest(e.created_at, e.deliver_at) as at from public.event_outbox e
             where e.tenant_id = t.tenant_id and e.status = 'pending' and e.seq >= t.seq
             order by e.seq limit 1) o on true
        )
        select min(p.at) as at,
               array_agg(p.tenant_id order by p.tenant_id) as tenants,
               -- a candidate proven: below it nothing was pending at the previous reading, and everything that could
               -- come below it has committed (it is seen now) or rolled back
               array_agg(case when ended and pg_snapshot_xmin(pg_current_snapshot()) >= candidate_xmax and p.candidate is not null
                              then greatest(p.seq, least(p.candidate, coalesce(p.lowest, p.candidate)))
                              else p.seq end order by p.tenant_id) as positions,
               array_agg(p.lowest order by p.tenant_id) as lowests,
               pg_snapshot_xmax(pg_current_snapshot()) as xmax
          into probed from probe p;
        -- after the probe's snapshot: what a tenant with nothing pending would number next, then who holds the events
        -- table for writing now (a transaction that took a seq the probe could not see holds it until it ends)
        last_seq := coalesce(pg_sequence_last_value(pg_get_serial_sequence('public.event_outbox', 'seq')::regclass), 0);
        return query
        select coalesce(extract(epoch from now() - least(
                 probed.at,
                 (select min(d.created_at) from public.outbox_deliveries d
                   where d.status in ('pending', 'failed')
                     and not exists (select 1 from public.outbox_consumers c
                                      where c.name = d.consumer_name and c.last_seen_at <= now() - orphaned_after)),
                 (select s.deliver_at from public.event_outbox s
                   where s.status = 'scheduled' and s.deliver_at <= now() order by s.deliver_at limit 1)
               ))::double precision, 0),
               probed.tenants, probed.positions,
               (select array_agg(coalesce(l, last_seq + 1) order by ord) from unnest(probed.lowests) with ordinality u(l, ord)),
               probed.xmax,
               coalesce((select array_agg(distinct l.virtualtransaction) from pg_locks l
                          where l.locktype = 'relation' and l.relation = any(outbox_tables)
                            and l.mode in ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
                            and l.pid is distinct from pg_backend_pid()), '{}'),
               here;
      end
      $$
    `);
    await q.query(
      `revoke all on function public.outbox_oldest_pending_age(interval, uuid[], bigint[], bigint[], xid8, text[], text) from public`,
    );
    await q.query(
      `grant execute on function public.outbox_oldest_pending_age(interval, uuid[], bigint[], bigint[], xid8, text[], text) to outbox_app, outbox_relay`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `drop function if exists public.outbox_oldest_pending_age(interval, uuid[], bigint[], bigint[], xid8, text[], text)`,
    );
  }
}
