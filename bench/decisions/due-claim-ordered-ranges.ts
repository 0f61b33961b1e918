/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/due-claim-ordered-ranges.ts`
 *
 * What the due claim's check for ordered consumers (`earlierInAggregate`, store/sql/claim-due.ts) costs as ranges
 * accumulate (ADR 1207, addenda "A floor reading from the open floor", left, and "The ordered consumers' check starts
 * at the oldest open delivery"). Three databases: today's tables (96 hours of history) and two partitioned ones,
 * 10 and 100 hourly ranges (6 and 96 hours back, 3 ahead). Each holds EVENTS (default 2,000) events of today, fanned out, with
 * one due delivery each of an ordered consumer (an aggregate key per event) and of an unordered one; and, for the
 * first HISTORY (default 100) aggregates, one delivered event an hour in every past range (nothing holds them). The due claim of 100 deliveries with the floor at today's range, on its generic plan, in a
 * transaction rolled back: shared buffers (hit + read) of its execution, deterministic. The last line makes one
 * delivered history row of the ordered consumer in the oldest range `dead` (aggregate HISTORY + 1, whose due
 * delivery it holds back): the
 * check's bound then starts at that range.
 */
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { claimDueDeliveries, type SqlStatement } from '../../libs/outbox/src/store/sql';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import { BenchDatabase } from '../harness/bench-database';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';
import { genericPlanBuffers as buffers } from '../../test/support/generic-plan-buffers';

const EVENTS = Number(process.env.EVENTS ?? 2_000);
/** Aggregates with one delivered event an hour in every past range (the due ones' history: aggregates 1…HISTORY). */
const HISTORY = Number(process.env.HISTORY ?? 100);
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
const NIL = '00000000-0000-0000-0000-000000000000';
const names = outboxNames();
/** Hours of history, and whether the tables are partitioned. */
const LAYOUTS = {
  "today's tables": [96, false],
  '10 hourly ranges': [6, true],
  '100 hourly ranges': [96, true],
} as const;
type Layout = keyof typeof LAYOUTS;

async function prepare(db: BenchDatabase, hoursBack: number, partitioned: boolean): Promise<void> {
  const start = new Date(Date.now() - hoursBack * 3_600_000);
  start.setUTCMinutes(0, 0, 0);
  const statements = partitionedLayoutSql('public', { width: '1 hour', ahead: 3, start: start.toISOString() })
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('--'));
  if (partitioned) for (const statement of statements) await db.sql(statement);
  // history first (smaller seqs): HISTORY aggregates with one event an hour back to the first range, delivered
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, aggregate_type, aggregate_id, published_at)
     select outbox_uuid_at(now() - h * interval '1 hour' + a * interval '1 millisecond'), $1::uuid, 'bench.ord.v1',
            '{}', 'published', 'order', a::text, now()
       from generate_series(1, $2::int) h, generate_series(1, $3::int + 1) a`,
    [TENANT, hoursBack, HISTORY],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, aggregate_key, processed_at)
     select id, tenant_id, c, seq, 'delivered',
            case when c = 'bench.ordered' then json_build_array(aggregate_type, aggregate_id)::text end, now()
       from event_outbox, unnest(array['bench.ordered', 'bench.unordered']) c`,
  );
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, aggregate_type, aggregate_id, deliveries_open)
     select (lpad(to_hex(floor(extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || '7' ||
             substr(md5(g::text), 1, 3) || '8' || substr(md5(g::text), 4, 15))::uuid,
            $1::uuid, 'bench.ord.v1', '{}', 'processing', 'order', g::text, 2 from generate_series(1, $2::int) g`,
    [TENANT, EVENTS],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, aggregate_key)
     select id, tenant_id, 'bench.ordered', seq, 'pending', json_build_array(aggregate_type, aggregate_id)::text
       from event_outbox where status = 'processing'
     union all
     select id, tenant_id, 'bench.unordered', seq, 'pending', null from event_outbox where status = 'processing'`,
  );
  await db.sql('analyze');
}

async function main(): Promise<void> {
  const { db: first, serverVersion, close } = await openDecisionDatabase();
  const dbs = new Map<Layout, BenchDatabase>();
  try {
    heading(
      'due-claim-ordered-ranges: the due claim of ordered consumers at 10 and 100 hourly ranges',
      serverVersion,
    );
    for (const [layout, [back, partitioned]] of Object.entries(LAYOUTS) as [Layout, [number, boolean]][]) {
      const db = dbs.size === 0 ? first : await BenchDatabase.create(first.url);
      dbs.set(layout, db);
      await prepare(db, back, partitioned);
    }
    for (const [consumer, dead] of [
      ['bench.unordered', false],
      ['bench.ordered', false],
      ['bench.ordered', true],
    ] as const) {
      const counts: string[] = [];
      for (const [layout, db] of dbs) {
        if (dead)
          await db.sql(
            `update outbox_deliveries set status = 'dead', processed_at = null
              where consumer_name = 'bench.ordered' and event_id = (
                select id from event_outbox where aggregate_id = $1 order by id limit 1)`,
            [String(HISTORY + 1)],
          );
        const [row] = await db.sql<{ floor: string | null }>(
          `select floor::text from outbox_claim_floor('10 minutes', null, null)`,
        );
        const client = new Client({ connectionString: db.url });
        await client.connect();
        try {
          const claim = (floor: string): SqlStatement =>
            claimDueDeliveries(names, {
              tenantId: TENANT,
              consumers: [consumer],
              limit: 100,
              leaseToken: NIL,
              leaseMs: 30_000,
              floor,
            });
          counts.push(
            `${layout}: ${await buffers(client, claim(row?.floor ?? NIL))} (nil floor ${await buffers(client, claim(NIL))})`,
          );
        } finally {
          await client.end();
        }
      }
      print(`  due claim of 100, ${(consumer + (dead ? ', one dead' : '')).padEnd(26)} ${counts.join(', ')}`);
    }
  } finally {
    for (const db of dbs.values()) if (db !== first) await db.drop().catch(() => undefined);
    await close();
  }
}

exitWhenDone(main());
