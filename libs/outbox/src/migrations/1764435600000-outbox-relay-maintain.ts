import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Lets `outbox_relay` vacuum `outbox_event_leases` (the relay does, every `relay.vacuumLeasesEvery` released
 * leases, so the table's dead rows do not pile up between autovacuum visits). VACUUM needs the table's owner or,
 * from PostgreSQL 17, the `MAINTAIN` privilege: granted where the server has it; on older servers only an owning
 * role vacuums. Frozen history: literal SQL.
 */
export class OutboxRelayMaintain1764435600000 implements MigrationInterface {
  name = 'OutboxRelayMaintain1764435600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      do $$ begin
        if current_setting('server_version_num')::int >= 170000 then
          execute 'grant maintain on table public.outbox_event_leases to outbox_relay';
        end if;
      end $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      do $$ begin
        if current_setting('server_version_num')::int >= 170000 then
          execute 'revoke maintain on table public.outbox_event_leases from outbox_relay';
        end if;
      end $$`);
  }
}
