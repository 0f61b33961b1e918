import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_dedupe_take`: takes an idempotency key for an event, or says which event holds it, writing the key's row
 * only when it must — a free key is inserted, an expired one taken over; a live key is read, neither written nor
 * locked, so enqueues of a held key do not wait for each other and do not fail under REPEATABLE READ (the
 * statement of OutboxDedupeKeys1764501900000, `insert … on conflict do update`, wrote a new version of a held key's
 * row: two enqueues of it waited for each other, and the second failed with 40001 under REPEATABLE READ).
 * It reads first (a held key: one statement); then `insert … on conflict do nothing` takes a free key, or waits
 * for a transaction that inserted (or took over) the key until it ends; then an expired key is taken over. Under
 * READ COMMITTED each statement in here reads with a snapshot of its own (a volatile function), so a key committed
 * while the insert waited is seen by the read of the next turn of the loop — a second statement of the caller's
 * could not see it under REPEATABLE READ, and one statement cannot under either. The loop turns again only when
 * the key's row changed between two of its statements (committed by another transaction, taken over, deleted by
 * retention). SECURITY INVOKER: the caller's policies and grants apply.
 * See docs/adr/1103-idempotency-keys.md ("Amended 2026-12-06"). Frozen history: literal SQL.
 */
export class OutboxDedupeTake1764502000000 implements MigrationInterface {
  name = 'OutboxDedupeTake1764502000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create function public.outbox_dedupe_take(
        key_tenant_id uuid, key_event_name text, key_value text, new_event_id uuid, window_ms float8)
      returns uuid
      language plpgsql volatile set search_path = pg_catalog, public as $$
      declare
        holder uuid;
      begin
        loop
          select k.event_id into holder from public.outbox_dedupe_keys k
           where k.tenant_id = key_tenant_id and k.event_name = key_event_name and k.dedupe_key = key_value
             and k.expires_at > now();
          if found then
            return holder;
          end if;
          insert into public.outbox_dedupe_keys as k (tenant_id, event_name, dedupe_key, event_id, expires_at)
          values (key_tenant_id, key_event_name, key_value, new_event_id,
                  now() + window_ms * interval '1 millisecond')
          on conflict (tenant_id, event_name, dedupe_key) do nothing
          returning k.event_id into holder;
          if found then
            return holder;
          end if;
          update public.outbox_dedupe_keys k
             set event_id = new_event_id, created_at = now(),
                 expires_at = now() + window_ms * interval '1 millisecond'
           where k.tenant_id = key_tenant_id and k.event_name = key_event_name and k.dedupe_key = key_value
             and k.expires_at <= now()
          returning k.event_id into holder;
          if found then
            return holder;
          end if;
        end loop;
      end
      $$`);
    await q.query(`revoke all on function public.outbox_dedupe_take(uuid, text, text, uuid, float8) from public`);
    await q.query(
      `grant execute on function public.outbox_dedupe_take(uuid, text, text, uuid, float8) to outbox_app, outbox_relay`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_dedupe_take(uuid, text, text, uuid, float8)`);
  }
}
