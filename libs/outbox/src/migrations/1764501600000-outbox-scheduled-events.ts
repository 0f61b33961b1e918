import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Delayed events (issue 36, docs/flow-control.md): an event enqueued with `deliverAt` or `delayMs` is written
 * `scheduled` with its `deliver_at`, out of every claim's partial index, so no claim sees it and none of them
 * changes. `outbox_promote_scheduled` (SECURITY DEFINER: it works across tenants under row-level security, as
 * `outbox_due_tenants` does) makes the due ones `pending` with a fresh `seq`, so each joins its aggregate's order
 * when it becomes due, and says when the next one is due; `outbox_oldest_pending_age` counts a promoted event from
 * its `deliver_at`. See docs/adr/1102-delayed-events-are-promoted.md.
 * Frozen history: literal SQL.
 */
export class OutboxScheduledEvents1764501600000 implements MigrationInterface {
  name = 'OutboxScheduledEvents1764501600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.event_outbox add column deliver_at timestamptz`);
    // the new list holds the old one: existing rows pass, so the check is validated without a rewrite
    await q.query(`
      alter table public.event_outbox drop constraint event_outbox_status_check,
        add constraint event_outbox_status_check
          check (status in ('pending', 'processing', 'published', 'failed', 'no_handlers', 'scheduled')) not valid`);
    await q.query(`alter table public.event_outbox validate constraint event_outbox_status_check`);
    await q.query(
      `create index event_outbox_scheduled_idx on public.event_outbox (deliver_at) where status = 'scheduled'`,
    );
    // One event at a time, in (deliver_at, seq) order: each takes the next seq in that order, so events due in
    // the same instant keep the order they were enqueued in. Rows another promotion holds are skipped, never
    // waited for. next_due_in_ms is by the database's clock, from now: a relay sets its timer with it.
    await q.query(`
      create function public.outbox_promote_scheduled(max_events integer)
      returns table (tenant_ids uuid[], promoted integer, next_due_in_ms double precision)
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        due record;
        tenants uuid[] := '{}';
        moved integer := 0;
      begin
        for due in
          select e.id, e.tenant_id from public.event_outbox e
           where e.status = 'scheduled' and e.deliver_at <= now()
           order by e.deliver_at, e.seq
           limit max_events
             for update skip locked
        loop
          update public.event_outbox set status = 'pending', seq = default, updated_at = now() where id = due.id;
          moved := moved + 1;
          if not due.tenant_id = any(tenants) then
            tenants := tenants || due.tenant_id;
          end if;
        end loop;
        return query
          select tenants, moved,
                 (select extract(epoch from (s.deliver_at - clock_timestamp())) * 1000
                    from public.event_outbox s where s.status = 'scheduled'
                   order by s.deliver_at limit 1)::float8;
      end
      $$`);
    await q.query(`revoke all on function public.outbox_promote_scheduled(integer) from public`);
    await q.query(`grant execute on function public.outbox_promote_scheduled(integer) to outbox_relay`);
    // a promoted event waits from its deliver_at, not from its insert: health checks must not see a day's delay as a day's backlog
    await q.query(oldestPendingAgeFunction('greatest(e.created_at, e.deliver_at)'));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(oldestPendingAgeFunction('e.created_at'));
    await q.query(`drop function if exists public.outbox_promote_scheduled(integer)`);
    // events still scheduled become due at once: without the column, nothing could hold them back
    await q.query(`update public.event_outbox set status = 'pending', seq = default where status = 'scheduled'`);
    await q.query(`drop index if exists public.event_outbox_scheduled_idx`);
    await q.query(`
      alter table public.event_outbox drop constraint event_outbox_status_check,
        add constraint event_outbox_status_check
          check (status in ('pending', 'processing', 'published', 'failed', 'no_handlers'))`);
    await q.query(`alter table public.event_outbox drop column if exists deliver_at`);
  }
}

/**
 * `outbox_oldest_pending_age` as migration OutboxAdmin1764428650000 made it, with `since` as the instant a pending
 * event `e` waits from (`e.created_at`: that version itself, for down).
 */
function oldestPendingAgeFunction(since: string): string {
  return `
      create or replace function public.outbox_oldest_pending_age(orphaned_after interval) returns double precision
      language sql stable security definer set search_path = pg_catalog, public as $$
        with recursive pending_t(tenant_id) as (
          (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
            from pending_t p where p.tenant_id is not null
        ), oldest_event as (
          select min((select ${since} from public.event_outbox e
                       where e.status = 'pending' and e.tenant_id = p.tenant_id order by e.seq limit 1)) as at
            from pending_t p where p.tenant_id is not null
        ), oldest_delivery as (
          select min(d.created_at) as at from public.outbox_deliveries d
           where d.status in ('pending', 'failed')
             and not exists (select 1 from public.outbox_consumers c
                              where c.name = d.consumer_name and c.last_seen_at <= now() - orphaned_after)
        )
        select coalesce(extract(epoch from now() - least((select at from oldest_event), (select at from oldest_delivery)))::double precision, 0)
      $$`;
}
