import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Idempotency keys of `enqueue` (issue 36, docs/flow-control.md "Idempotency keys"): one row per (tenant, event
 * name, key) naming the event that holds the key until `expires_at`. The app's transaction writes it with the
 * event (`insert … on conflict do update`), so two transactions enqueuing one key commit one event: the second
 * waits on the primary key for the first to end, then sees its row (or, if it rolled back, writes its own).
 * Under row-level security per tenant like the events. See docs/adr/1103-idempotency-keys.md. Frozen history:
 * literal SQL.
 *
 * - `event_outbox.dedupe_key`: the key a keyed event was enqueued with, for the board (null otherwise; a
 *   nullable column without default costs existing rows nothing).
 * - `outbox_dedupe_replace`: the payload of a keyed event replaced by a later enqueue of its key ('replace'),
 *   only while no relay claimed it: the event is `pending` without a lease, or `scheduled` (delayed, not due).
 *   Given `new_deliver_at` ('debounce'), only a `scheduled` event, whose `deliver_at` it moves as well. SECURITY DEFINER, so the app role gets no right to read or update the
 *   events; it checks the caller's tenant as the policies do (a role that bypasses row-level security —
 *   superuser, owner, BYPASSRLS — may name any tenant, as it may in the tables; after SET ROLE, the role set).
 * - `outbox_purge_dedupe_keys`: retention of expired keys across tenants, in bounded batches (SECURITY
 *   DEFINER, as `outbox_purge_settled`).
 */
export class OutboxDedupeKeys1764501900000 implements MigrationInterface {
  name = 'OutboxDedupeKeys1764501900000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.outbox_dedupe_keys (
        tenant_id uuid not null,
        event_name text not null,
        dedupe_key text not null,
        event_id uuid not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        constraint outbox_dedupe_keys_pkey primary key (tenant_id, event_name, dedupe_key)
      )`);
    await q.query(`create index outbox_dedupe_keys_expiry_idx on public.outbox_dedupe_keys (expires_at)`);
    await q.query(`alter table public.outbox_dedupe_keys enable row level security`);
    const tenantOf = `coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid`;
    await q.query(`
      create policy outbox_dedupe_keys_tenant_isolation on public.outbox_dedupe_keys
        to outbox_app, outbox_relay
        using (tenant_id = ${tenantOf})
        with check (tenant_id = ${tenantOf})`);
    await q.query(`grant select, insert, update on public.outbox_dedupe_keys to outbox_app`);
    await q.query(`grant select, insert, update, delete on public.outbox_dedupe_keys to outbox_relay`);
    await q.query(`alter table public.event_outbox add column dedupe_key text`);

    // The role the caller's statements run as: current_user is this function's owner in here, and session_user
    // is the login role, which a session that ran SET ROLE outbox_app no longer acts as (the policies apply to it).
    const caller = `coalesce(nullif(current_setting('role'), 'none'), session_user)`;
    // Lock the event row first, then look for a lease in a statement of its own: under READ COMMITTED that
    // statement sees a claim that committed while the lock was awaited, and a claim that comes later skips the
    // locked row (for update skip locked) until this transaction ends. Under REPEATABLE READ or SERIALIZABLE a
    // claim committed after the transaction's snapshot stays invisible, so the payload is kept there.
    await q.query(`
      create function public.outbox_dedupe_replace(
        replaced_id uuid, new_payload jsonb, new_version integer, new_deliver_at timestamptz default null)
      returns boolean
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      begin
        if current_setting('transaction_isolation') <> 'read committed' then
          return false;
        end if;
        perform 1 from public.event_outbox e
         where e.id = replaced_id
           and (e.status = 'scheduled' or (e.status = 'pending' and new_deliver_at is null))
           and (e.tenant_id = ${tenantOf}
                or exists (select 1 from pg_roles r
                            where r.rolname = ${caller} and (r.rolsuper or r.rolbypassrls))
                or pg_has_role(${caller}, (select c.relowner from pg_class c
                                            where c.oid = 'public.event_outbox'::regclass), 'MEMBER'))
           for update;
        if not found then
          return false;
        end if;
        if exists (select 1 from public.outbox_event_leases l where l.event_id = replaced_id) then
          return false;
        end if;
        update public.event_outbox
           set payload = new_payload, schema_version = new_version, updated_at = now(),
               deliver_at = coalesce(new_deliver_at, deliver_at)
         where id = replaced_id;
        return true;
      end
      $$`);
    await q.query(`revoke all on function public.outbox_dedupe_replace(uuid, jsonb, integer, timestamptz) from public`);
    await q.query(
      `grant execute on function public.outbox_dedupe_replace(uuid, jsonb, integer, timestamptz) to outbox_app, outbox_relay`,
    );

    await q.query(`
      create function public.outbox_purge_dedupe_keys(max_keys integer) returns integer
      language sql volatile security definer set search_path = pg_catalog, public as $$
        with doomed as (
          select tenant_id, event_name, dedupe_key from public.outbox_dedupe_keys
           where expires_at <= now()
           order by expires_at
           limit max_keys
             for update skip locked
        ), deleted as (
          delete from public.outbox_dedupe_keys k using doomed
           where k.tenant_id = doomed.tenant_id and k.event_name = doomed.event_name
             and k.dedupe_key = doomed.dedupe_key and k.expires_at <= now()
          returning 1
        )
        select count(*)::int from deleted
      $$`);
    await q.query(`revoke all on function public.outbox_purge_dedupe_keys(integer) from public`);
    await q.query(`grant execute on function public.outbox_purge_dedupe_keys(integer) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_purge_dedupe_keys(integer)`);
    await q.query(`drop function if exists public.outbox_dedupe_replace(uuid, jsonb, integer, timestamptz)`);
    await q.query(`alter table public.event_outbox drop column if exists dedupe_key`);
    await q.query(`drop table if exists public.outbox_dedupe_keys`);
  }
}
