import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the operator's toolkit needs beyond the tenant-scoped tables: one SECURITY DEFINER function that the
 * health indicator calls to read the oldest pending age across every tenant (a number, nothing else crosses
 * tenants). Frozen history: literal SQL, nothing imported from libs/.
 */
export class OutboxAdmin1764428650000 implements MigrationInterface {
  name = 'OutboxAdmin1764428650000';

  async up(q: QueryRunner): Promise<void> {
    // Age in seconds of the oldest work not done yet, across tenants: pending events (not fanned out) and
    // pending or failed (awaiting retry) deliveries; 0 when there is none. Deliveries of consumers that the
    // registry knows but no instance reported within `orphaned_after` are left out: no relay will take them,
    // they are shown by the stats as orphaned, and they must not keep a health check down.
    // Events: one index probe per tenant over event_outbox_pending_idx (seq order is insert order), so a large
    // backlog costs nothing more. Deliveries: a scan of the pending/failed partial index only.
    await q.query(`
      create function public.outbox_oldest_pending_age(orphaned_after interval) returns double precision
      language sql stable security definer set search_path = pg_catalog, public as $$
        with recursive pending_t(tenant_id) as (
          (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
            from pending_t p where p.tenant_id is not null
        ), oldest_event as (
          select min((select e.created_at from public.event_outbox e
                       where e.status = 'pending' and e.tenant_id = p.tenant_id order by e.seq limit 1)) as at
            from pending_t p where p.tenant_id is not null
        ), oldest_delivery as (
          select min(d.created_at) as at from public.outbox_deliveries d
           where d.status in ('pending', 'failed')
             and not exists (select 1 from public.outbox_consumers c
                              where c.name = d.consumer_name and c.last_seen_at <= now() - orphaned_after)
        )
        select coalesce(extract(epoch from now() - least((select at from oldest_event), (select at from oldest_delivery)))::double precision, 0)
      $$`);
    await q.query(`revoke all on function public.outbox_oldest_pending_age(interval) from public`);
    await q.query(`grant execute on function public.outbox_oldest_pending_age(interval) to outbox_app, outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_oldest_pending_age(interval)`);
  }
}
