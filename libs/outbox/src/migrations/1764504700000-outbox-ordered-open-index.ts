import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * In the partitioned layout, the due claim's check for ordered consumers starts at the tenant's oldest open ordered
 * delivery (docs/adr/1207-partitioned-history.md, addendum "The ordered consumers' check starts at the oldest open
 * delivery"). The check (an earlier delivery of the aggregate not delivered, an earlier event pending) probed every
 * range once per candidate: 50,767 buffers for a claim of 100 at 100 hourly ranges. The claim now reads, once, the
 * lowest event id among the tenant's deliveries with an aggregate key that are not delivered (pending, failed,
 * processing or dead) through this index, and bounds the check by it, so the ranges below are pruned.
 *
 * Built only when `outbox_deliveries` is already partitioned: today's tables are never bounded (their claims' floor
 * is the nil id), and would only pay the index's writes. Converting later builds it with the layout's other indexes
 * (`npx nestjs-pg-outbox sql --partitioned`, step 1). On a live partitioned database, build it first without
 * blocking writes — on the parent `only`, then on each partition concurrently, each attached: the statements
 * `npx nestjs-pg-outbox doctor` prints for a missing index —; this migration then finds it (`if not exists`).
 * Frozen history: literal SQL.
 */
export class OutboxOrderedOpenIndex1764504700000 implements MigrationInterface {
  name = 'OutboxOrderedOpenIndex1764504700000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      do $$
      begin
        if (select relkind from pg_class where oid = 'public.outbox_deliveries'::regclass) = 'p' then
          create index if not exists outbox_deliveries_ordered_open_idx on public.outbox_deliveries (tenant_id, event_id)
            where aggregate_key is not null and status <> 'delivered';
        end if;
      end
      $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop index if exists public.outbox_deliveries_ordered_open_idx`);
  }
}
