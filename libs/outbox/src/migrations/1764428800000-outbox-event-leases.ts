import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Event leases in an UNLOGGED table. Frozen history: literal SQL.
 *
 * A relay claims the in-process deliveries of an event through the event (its rows are written once, with the
 * outcome). The claim lives in `outbox_event_leases` — one small row per event in flight, never WAL-logged,
 * deleted by the statement that records the outcomes — rather than on the event row, which would then be written
 * twice per relayed event (claimed, then settled), the first time changing indexed columns. An event whose
 * handlers all run in-process stays `pending` until that statement settles it, written once, as a hand-written
 * relay would. `outbox_due_tenants` also finds tenants whose event leases expired.
 *
 * UNLOGGED means the table is emptied if PostgreSQL itself crashes (not on a clean restart): every claim in it
 * belonged to transactions the crash ended anyway, so the events are simply claimed again; only the count of
 * claims that never finished (poison-event detection) starts over.
 */
export class OutboxEventLeases1764428800000 implements MigrationInterface {
  name = 'OutboxEventLeases1764428800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create unlogged table public.outbox_event_leases (
        event_id uuid primary key,
        tenant_id uuid not null,
        lease_token uuid not null,
        lease_expires_at timestamptz not null,
        -- claims of this event so far; more than one means an earlier claim never recorded its outcome
        claim_count integer not null default 1
      )`);
    await q.query(
      `create index outbox_event_leases_expiry_idx on public.outbox_event_leases (tenant_id, lease_expires_at)`,
    );
    await q.query(`alter table public.outbox_event_leases enable row level security`);
    const tenantOf = `coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid`;
    await q.query(`
      create policy outbox_event_leases_tenant_isolation on public.outbox_event_leases
        to outbox_app, outbox_relay
        using (tenant_id = ${tenantOf})
        with check (tenant_id = ${tenantOf})`);
    await q.query(`grant select, insert, update, delete on public.outbox_event_leases to outbox_relay`);

    // Same contract as before, plus tenants with expired event leases. PL/pgSQL rather than SQL: a SQL function
    // that is not inlined is planned on every call, and planning these loose index scans cost several times their
    // execution; PL/pgSQL keeps the plan for the session (the pooled connection).
    await q.query(dueTenantsFunction(LEASED_FROM_LEASE_TABLE));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(dueTenantsFunction(null));
    await q.query(`drop table if exists public.outbox_event_leases`);
  }
}

const LEASED_FROM_LEASE_TABLE = `
  (select tenant_id from public.outbox_event_leases where lease_expires_at <= now() order by tenant_id limit 1)
  union all
  select (select l.tenant_id from public.outbox_event_leases l
           where l.lease_expires_at <= now() and l.tenant_id > t.tenant_id
           order by l.tenant_id limit 1)
    from leased_t t where t.tenant_id is not null`;

/**
 * `outbox_due_tenants` with the given loose index scan for tenants with expired event leases, or with only the
 * scans the first migration's version had (`null`, for down).
 */
function dueTenantsFunction(leasedBranch: string | null): string {
  const leasedCte = leasedBranch === null ? '' : `leased_t(tenant_id) as (${leasedBranch}\n      ), `;
  const leasedRows = leasedBranch === null ? '' : `union all select l.tenant_id, true from leased_t l\n        `;
  return `
    create or replace function public.outbox_due_tenants(max_tenants integer, after_tenant uuid default null)
    returns table (tenant_id uuid, has_new boolean, has_due boolean)
    language plpgsql stable security definer set search_path = pg_catalog, public as $$
    #variable_conflict use_column
    begin
      return query
      with recursive pending_t(tenant_id) as (
        (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
        union all
        select (select e.tenant_id from public.event_outbox e
                 where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
          from pending_t p where p.tenant_id is not null
      ), retry_t(tenant_id) as (
        (select tenant_id from public.outbox_deliveries
          where status in ('pending', 'failed') and next_attempt_at <= now() order by tenant_id limit 1)
        union all
        select (select d.tenant_id from public.outbox_deliveries d
                 where d.status in ('pending', 'failed') and d.next_attempt_at <= now() and d.tenant_id > r.tenant_id
                 order by d.tenant_id limit 1)
          from retry_t r where r.tenant_id is not null
      ), ${leasedCte}stale_t(tenant_id) as (
        (select tenant_id from public.outbox_deliveries
          where status = 'processing' and lease_expires_at <= now() order by tenant_id limit 1)
        union all
        select (select d.tenant_id from public.outbox_deliveries d
                 where d.status = 'processing' and d.lease_expires_at <= now() and d.tenant_id > s.tenant_id
                 order by d.tenant_id limit 1)
          from stale_t s where s.tenant_id is not null
      )
      select t.tenant_id, bool_or(t.is_new), bool_or(not t.is_new) from (
        select p.tenant_id, true as is_new from pending_t p
        ${leasedRows}union all select r.tenant_id, false from retry_t r
        union all select s.tenant_id, false from stale_t s
      ) t where t.tenant_id is not null
      group by t.tenant_id
      order by t.tenant_id <= after_tenant, t.tenant_id
      limit max_tenants;
    end
    $$`;
}
