import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An unambiguous aggregate key for ordered consumers. Until 0.1.0 the key was `type || ':' || id`, so
 * (`a:b`, `c`) and (`a`, `b:c`) shared `a:b:c` (and a null type was the empty one): one dead delivery blocked an
 * unrelated aggregate. The key is now the JSON array `["<type>", "<id>"]` (`[null, "<id>"]` without a type),
 * which JSON's string escaping makes injective. Existing keys are rewritten from their events, so an upgraded
 * database keeps its order and its blocked aggregates. Frozen history: literal SQL.
 */
export class OutboxAggregateKey1764450000000 implements MigrationInterface {
  name = 'OutboxAggregateKey1764450000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      update public.outbox_deliveries d
         set aggregate_key = json_build_array(e.aggregate_type, e.aggregate_id)::text
        from public.event_outbox e
       where e.id = d.event_id and d.aggregate_key is not null`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      update public.outbox_deliveries d
         set aggregate_key = coalesce(e.aggregate_type, '') || ':' || e.aggregate_id
        from public.event_outbox e
       where e.id = d.event_id and d.aggregate_key is not null`);
  }
}
