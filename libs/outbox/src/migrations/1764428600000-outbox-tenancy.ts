import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Row-level security per tenant, the two roles the outbox expects, the persisted consumer registry, and the
 * SECURITY DEFINER functions the relay uses across tenants. Frozen history: literal SQL.
 *
 * Roles (NOLOGIN, created if missing; grant them to your login roles):
 * - `outbox_app`: what the app's own transactions need to enqueue (insert into event_outbox).
 * - `outbox_relay`: what the relay and the admin service need.
 * Policies read the transaction-local setting `app.current_tenant_id`. The table owner and superusers bypass
 * row-level security (PostgreSQL's rule), so multi-tenant apps must connect as a role that is neither.
 */
export class OutboxTenancy1764428600000 implements MigrationInterface {
  name = 'OutboxTenancy1764428600000';

  async up(q: QueryRunner): Promise<void> {
    for (const role of ['outbox_app', 'outbox_relay']) {
      await q.query(`
        do $$ begin
          if not exists (select from pg_roles where rolname = '${role}') then
            create role ${role} nologin;
          end if;
        exception when duplicate_object or unique_violation then
          null; -- another database of this cluster created it at the same moment
        end $$`);
    }

    await q.query(`
      create table public.outbox_consumers (
        name text primary key,
        event_patterns text[] not null,
        kind text not null default 'handler',
        ordered boolean not null default false,
        first_seen_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now()
      )`);
    await q.query(`
      create table public.outbox_consumer_instances (
        consumer_name text not null references public.outbox_consumers (name) on delete cascade,
        instance_id text not null,
        last_seen_at timestamptz not null default now(),
        constraint outbox_consumer_instances_pkey primary key (consumer_name, instance_id)
      )`);

    // An unset setting means the single tenant (tenancy 'single'), so single-tenant apps need no setting even
    // on a non-owner role; a multi-tenant app that forgot to set it sees nothing of any real tenant.
    const tenantOf = `coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid`;
    for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox']) {
      await q.query(`alter table public.${table} enable row level security`);
      await q.query(`
        create policy ${table}_tenant_isolation on public.${table}
          to outbox_app, outbox_relay
          using (tenant_id = ${tenantOf})
          with check (tenant_id = ${tenantOf})`);
    }

    await q.query(`grant usage on schema public to outbox_app, outbox_relay`);
    await q.query(`grant insert on public.event_outbox to outbox_app`);
    await q.query(`grant select, insert, update, delete on public.event_outbox, public.outbox_deliveries, public.consumer_inbox to outbox_relay`);
    await q.query(`grant select, insert, update, delete on public.outbox_consumers, public.outbox_consumer_instances to outbox_relay`);
    await q.query(`revoke all on function public.outbox_due_tenants(integer, uuid) from public`);
    await q.query(`grant execute on function public.outbox_due_tenants(integer, uuid) to outbox_relay`);

    // Retention across tenants in bounded batches: deletes up to max_events settled events older than the
    // cut-off, with their delivery and inbox rows, and returns how many events it removed. Only `published`
    // and `no_handlers` events: failed ones wait for replay or an explicit purge. Row locks are skipped, so it
    // never waits on the relay, and each call is one short transaction.
    await q.query(`
      create function public.outbox_purge_settled(older_than timestamptz, max_events integer) returns integer
      language sql volatile security definer set search_path = pg_catalog, public as $$
        with doomed as (
          select id from public.event_outbox
           where status in ('published', 'no_handlers') and published_at < older_than
           order by published_at
           limit max_events
             for update skip locked
        ), inbox as (
          delete from public.consumer_inbox i using doomed where i.event_id = doomed.id
        ), deliveries as (
          delete from public.outbox_deliveries d using doomed where d.event_id = doomed.id
        ), events as (
          delete from public.event_outbox e using doomed where e.id = doomed.id returning 1
        )
        select count(*)::int from events
      $$`);
    await q.query(`revoke all on function public.outbox_purge_settled(timestamptz, integer) from public`);
    await q.query(`grant execute on function public.outbox_purge_settled(timestamptz, integer) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_purge_settled(timestamptz, integer)`);
    for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox']) {
      await q.query(`drop policy if exists ${table}_tenant_isolation on public.${table}`);
      await q.query(`alter table public.${table} disable row level security`);
    }
    await q.query(`revoke all on public.event_outbox, public.outbox_deliveries, public.consumer_inbox from outbox_app, outbox_relay`);
    await q.query(`drop table if exists public.outbox_consumer_instances`);
    await q.query(`drop table if exists public.outbox_consumers`);
    await q.query(`revoke usage on schema public from outbox_app, outbox_relay`);
    // The roles are cluster-wide and may serve other databases: they are left in place.
  }
}
