import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the operator's board needs. Frozen history: literal SQL, nothing imported from libs/.
 *
 * - `outbox_audit`: one row per operator action (who, what, which tenant, when, how many rows), written in the
 *   action's own transaction; append-only for `outbox_relay` (select and insert, no update or delete).
 * - `outbox_activity`: deliveries per tenant, consumer and minute (delivered, failed, dead, deferred), summed in
 *   memory by each instance that imports the board and upserted every few seconds through
 *   `outbox_record_activity` (SECURITY DEFINER: one statement for every tenant), which also drops minutes older
 *   than two hours. The board's chart reads it instead of the delivery history.
 * - `outbox_deliveries_open_idx`: deliveries not delivered, by tenant, consumer, status and id, so the board counts
 *   each consumer's open work (capped), finds its oldest, and lists its newest failures without reading
 *   delivered rows. In-process deliveries are inserted delivered and never enter it.
 * - `event_outbox_processing_idx`: the events still waiting on external deliveries, counted by tenant.
 * - `outbox_row_estimate`: the planner's estimate of a tenant's settled rows (published events, delivered
 *   deliveries), from `explain`: counting them would read the whole history of the tenant.
 * See docs/adr/0401-board-reads-bounded-queries.md for what was measured.
 */
export class OutboxBoard1764500100000 implements MigrationInterface {
  name = 'OutboxBoard1764500100000';

  async up(q: QueryRunner): Promise<void> {
    const tenantOf = `coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid`;

    await q.query(`
      create table public.outbox_audit (
        id bigint generated always as identity primary key,
        tenant_id uuid not null,
        actor text not null,
        action text not null,
        target jsonb not null default '{}'::jsonb,
        rows_affected integer not null,
        created_at timestamptz not null default now()
      )`);
    await q.query(`create index outbox_audit_tenant_idx on public.outbox_audit (tenant_id, id)`);
    await q.query(`alter table public.outbox_audit enable row level security`);
    await q.query(`
      create policy outbox_audit_tenant_isolation on public.outbox_audit
        to outbox_app, outbox_relay
        using (tenant_id = ${tenantOf})
        with check (tenant_id = ${tenantOf})`);
    await q.query(`grant select, insert on public.outbox_audit to outbox_relay`);

    await q.query(`
      create table public.outbox_activity (
        tenant_id uuid not null,
        minute timestamptz not null,
        consumer_name text not null,
        delivered integer not null default 0,
        failed integer not null default 0,
        dead integer not null default 0,
        deferred integer not null default 0,
        constraint outbox_activity_pkey primary key (tenant_id, minute, consumer_name)
      )`);
    await q.query(`create index outbox_activity_minute_idx on public.outbox_activity (minute)`);
    await q.query(`alter table public.outbox_activity enable row level security`);
    await q.query(`
      create policy outbox_activity_tenant_isolation on public.outbox_activity
        to outbox_app, outbox_relay
        using (tenant_id = ${tenantOf})`);
    await q.query(`grant select on public.outbox_activity to outbox_relay`);
    await q.query(`
      create function public.outbox_record_activity(
        tenants uuid[], minutes timestamptz[], consumers text[],
        delivered integer[], failed integer[], dead integer[], deferred integer[]
      ) returns void
      language sql volatile security definer set search_path = pg_catalog, public as $$
        insert into public.outbox_activity as a (tenant_id, minute, consumer_name, delivered, failed, dead, deferred)
        select * from unnest(tenants, minutes, consumers, delivered, failed, dead, deferred)
        on conflict (tenant_id, minute, consumer_name) do update
          set delivered = a.delivered + excluded.delivered, failed = a.failed + excluded.failed,
              dead = a.dead + excluded.dead, deferred = a.deferred + excluded.deferred;
        delete from public.outbox_activity where minute < now() - interval '2 hours';
      $$`);
    await q.query(
      `revoke all on function public.outbox_record_activity(uuid[], timestamptz[], text[], integer[], integer[], integer[], integer[]) from public`,
    );
    await q.query(
      `grant execute on function public.outbox_record_activity(uuid[], timestamptz[], text[], integer[], integer[], integer[], integer[]) to outbox_relay`,
    );

    await q.query(
      `create index outbox_deliveries_open_idx on public.outbox_deliveries (tenant_id, consumer_name, status, id)
         where status <> 'delivered'`,
    );
    await q.query(
      `create index event_outbox_processing_idx on public.event_outbox (tenant_id) where status = 'processing'`,
    );

    // SECURITY INVOKER: explain plans the query under the caller's row-level security, and reads nothing.
    // Volatile only because PostgreSQL refuses EXPLAIN in a stable function.
    await q.query(`
      create function public.outbox_row_estimate(tenant uuid, status text, consumer text default null)
      returns bigint
      language plpgsql volatile set search_path = pg_catalog, public as $$
      declare
        plan json;
      begin
        if consumer is null then
          execute format('explain (format json) select 1 from public.event_outbox where tenant_id = %L and status = %L',
                         tenant, status) into plan;
        else
          execute format('explain (format json) select 1 from public.outbox_deliveries where tenant_id = %L and consumer_name = %L and status = %L',
                         tenant, consumer, status) into plan;
        end if;
        return (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
      end
      $$`);
    await q.query(`grant execute on function public.outbox_row_estimate(uuid, text, text) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_row_estimate(uuid, text, text)`);
    await q.query(`drop index if exists public.event_outbox_processing_idx`);
    await q.query(`drop index if exists public.outbox_deliveries_open_idx`);
    await q.query(
      `drop function if exists public.outbox_record_activity(uuid[], timestamptz[], text[], integer[], integer[], integer[], integer[])`,
    );
    await q.query(`drop table if exists public.outbox_activity`);
    await q.query(`drop table if exists public.outbox_audit`);
  }
}
