import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retention deletes, with a settled event, only the inbox rows the relay wrote for it. `outbox_purge_settled`
 * deleted every `consumer_inbox` row whose `event_id` was the purged event's id, in every tenant: since the
 * inbox of broker messages records any message id (a UUID as `event_id` itself), another tenant's message with
 * that id lost its record when the event was purged, and ran again at its next redelivery — a producer picks
 * its ids, so it could choose another tenant's event ids. Frozen history: literal SQL.
 *
 * - The event's tenant only: the relay records a delivery under its event's tenant.
 * - The relay's rows only, those with no `first_seen_at` (the relay never writes it, the inbox always does; see
 *   `OutboxInbox1764500300000`): the inbox's record of a broker message carrying the event's id in the event's
 *   own tenant — the event sent through a broker and received back — is the inbox's, kept like its other
 *   records, so a redelivery after the event was purged is still a duplicate.
 * The floor checks are those of `OutboxPurgeFloor1764450300000`; down restores that function as it was.
 * `create or replace` keeps the function's owner and grants.
 */
export class OutboxPurgeRelayInbox1764500800000 implements MigrationInterface {
  name = 'OutboxPurgeRelayInbox1764500800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create or replace function public.outbox_purge_settled(older_than timestamptz, max_events integer) returns integer
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        deleted integer;
      begin
        if older_than is null or older_than > now() - interval '1 hour' then
          raise exception 'outbox_purge_settled: cut-off % is less than an hour ago; events settled within the last hour are never purged', older_than
            using errcode = '22023';
        end if;
        if max_events is null or max_events < 1 then
          raise exception 'outbox_purge_settled: max_events must be at least 1, got %', max_events using errcode = '22023';
        end if;
        with doomed as (
          select id, tenant_id from public.event_outbox
           where status in ('published', 'no_handlers') and published_at < older_than
           order by published_at
           limit max_events
             for update skip locked
        ), inbox as (
          -- the relay's records of the event's deliveries; another tenant's message, or a broker message the
          -- inbox recorded (first_seen_at), may carry the same id
          delete from public.consumer_inbox i using doomed
           where i.event_id = doomed.id and i.tenant_id = doomed.tenant_id and i.first_seen_at is null
        ), deliveries as (
          delete from public.outbox_deliveries d using doomed where d.event_id = doomed.id
        ), events as (
          delete from public.event_outbox e using doomed where e.id = doomed.id returning 1
        )
        select count(*)::int into deleted from events;
        return deleted;
      end $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      create or replace function public.outbox_purge_settled(older_than timestamptz, max_events integer) returns integer
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        deleted integer;
      begin
        if older_than is null or older_than > now() - interval '1 hour' then
          raise exception 'outbox_purge_settled: cut-off % is less than an hour ago; events settled within the last hour are never purged', older_than
            using errcode = '22023';
        end if;
        if max_events is null or max_events < 1 then
          raise exception 'outbox_purge_settled: max_events must be at least 1, got %', max_events using errcode = '22023';
        end if;
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
        select count(*)::int into deleted from events;
        return deleted;
      end $$`);
  }
}
