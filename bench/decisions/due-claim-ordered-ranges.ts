/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/due-claim-ordered-ranges.ts`
 *
 * What the due claim's check for ordered consumers (`earlierInAggregate`, store/sql/claim-due.ts) costs as ranges
 * accumulate (ADR 1207, addendum "A floor reading from the open floor", left). Two partitioned databases: 10 and 100
 * hourly ranges (6 and 96 hours back, 3 ahead). Each holds EVENTS (default 2,000) events of today, fanned out, with
 * one due delivery each of an ordered consumer (an aggregate key per event) and of an unordered one; and, for the
 * first HISTORY (default 100) aggregates, one delivered event an hour in every past range (nothing holds them). The due claim of 100 deliveries with the floor at today's range, on its generic plan, in a
 * transaction rolled back: shared buffers (hit + read) of its execution, deterministic.
 */
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { claimDueDeliveries, type SqlStatement } from '../../libs/outbox/src/store/sql';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import { BenchDatabase } from '../harness/bench-database';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 2_000);
/** Aggregates with one delivered event an hour in every past range (the due ones' history: aggregates 1…HISTORY). */
const HISTORY = Number(process.env.HISTORY ?? 100);
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
const NIL = '00000000-0000-0000-0000-000000000000';
const names = outboxNames();
const LAYOUTS = { '10 hourly ranges': 6, '100 hourly ranges': 96 } as const;
type Layout = keyof typeof LAYOUTS;

async function prepare(db: BenchDatabase, hoursBack: number): Promise<void> {
  const start = new Date(Date.now() - hoursBack * 3_600_000);
  start.setUTCMinutes(0, 0, 0);
  const statements = partitionedLayoutSql('public', { width: '1 hour', ahead: 3, start: start.toISOString() })
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('--'));
  for (const statement of statements) await db.sql(statement);
  // history first (smaller seqs): HISTORY aggregates with one event an hour back to the first range, delivered
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, aggregate_type, aggregate_id, published_at)
     select outbox_uuid_at(now() - h * interval '1 hour' + a * interval '1 millisecond'), $1::uuid, 'bench.ord.v1',
            '{}', 'published', 'order', a::text, now()
       from generate_series(1, $2::int) h, generate_series(1, $3::int) a`,
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

/** Shared buffers of one execution of `statement` on its generic plan (prepared), rolled back. */
async function buffers(client: Client, statement: SqlStatement): Promise<number> {
  await client.query('begin');
  try {
    await client.query('set local plan_cache_mode = force_generic_plan');
    await client.query(`prepare probe as ${statement.text}`);
    const args = (statement.values as unknown[])
      .map((v) =>
        Array.isArray(v)
          ? client.escapeLiteral(`{${v.map((x) => JSON.stringify(x)).join(',')}}`)
          : typeof v === 'number'
            ? String(v)
            : client.escapeLiteral(String(v as string)),
      )
      .join(', ');
    // five executions first: the plan cache's generic plan, as the relay's named statement
    for (let i = 0; i < 5; i++) {
      await client.query('savepoint s');
      await client.query(`execute probe(${args})`);
      await client.query('rollback to savepoint s');
    }
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, buffers, costs off, timing off, summary off) execute probe(${args})`,
    );
    const top = rows.map((r) => r['QUERY PLAN']).find((line) => /Buffers:/.test(line)) ?? '';
    return [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  } finally {
    await client.query('rollback');
    // a prepared statement outlives the transaction
    await client.query('deallocate probe');
  }
}

async function main(): Promise<void> {
  const { db: first, serverVersion, close } = await openDecisionDatabase();
  const dbs = new Map<Layout, BenchDatabase>();
  try {
    heading(
      'due-claim-ordered-ranges: the due claim of ordered consumers at 10 and 100 hourly ranges',
      serverVersion,
    );
    for (const [layout, back] of Object.entries(LAYOUTS) as [Layout, number][]) {
      const db = dbs.size === 0 ? first : await BenchDatabase.create(first.url);
      dbs.set(layout, db);
      await prepare(db, back);
    }
    for (const consumer of ['bench.unordered', 'bench.ordered']) {
      const counts: string[] = [];
      for (const [layout, db] of dbs) {
        const [row] = await db.sql<{ floor: string }>(
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
            `${layout}: ${await buffers(client, claim(row!.floor))} (nil floor ${await buffers(client, claim(NIL))})`,
          );
        } finally {
          await client.end();
        }
      }
      print(`  due claim of 100, ${consumer.padEnd(16)} ${counts.join(', ')}`);
    }
  } finally {
    for (const db of dbs.values()) if (db !== first) await db.drop().catch(() => undefined);
    await close();
  }
}

exitWhenDone(main());
