/**
 * `DATABASE_URL=… node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/held-purge.ts`
 *
 * What one retention batch costs under a held snapshot (ADR 1206, addendum "Retention's purge"): events settled
 * as the relay settles them (100 per transaction, one `published_at` each, with two delivered deliveries and the
 * relay's inbox row), then a second connection holds `begin isolation level repeatable read; select 1` and
 * retention deletes them in batches of 1,000 from its positions. At 60k, 120k and 240k deleted (240k is 10 minutes
 * at 400 events/s), `EXPLAIN (ANALYZE, BUFFERS)` of the next batch, rolled back, the last of three runs: the
 * two-argument form (every batch from the oldest settled event, as before positions), the positioned form from
 * no position (the hourly full scan) and from the position the batches reached. `SCATTER=1`: the settling
 * transactions' rows spread over the table (`(g × 7919) mod total`, a permutation), so the `published_at` index
 * does not follow the heap, as a settled row's version goes where the table has room: each entry walked is then a
 * heap page of its own.
 */
import { BENCH_TENANT } from '../harness/bench-database';
import { purgeSettledBatch, type PurgePositions } from '../../libs/outbox/src/store/sql/retention';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { connectTwo, explainRolledBack, heading, openDecisionDatabase, print } from './decision-server';

const SIZES = (process.env.DELETED ?? '60000,120000,240000').split(',').map(Number);
const BATCH = 1000;
const PER_SETTLE = 100;
const EVENT = 'bench.held-purge.v1';
const START: PurgePositions = { ranges: [], ats: [] };

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  heading(
    `Retention's purge under a held snapshot (ADR 1206, addendum "Retention's purge"), rows ${process.env.SCATTER ? 'scattered' : 'in order'}`,
    serverVersion,
  );
  const n = outboxNames();
  const [client, holder] = await connectTwo(db.url);
  try {
    const total = Math.max(...SIZES) + 2 * BATCH;
    // settled 30 days ago, a transaction of PER_SETTLE events every 250 ms
    await client.query(
      `with ev as (
         insert into event_outbox (id, tenant_id, event_name, payload, status, published_at, created_at, updated_at)
         select gen_random_uuid(), $1::uuid, $2, '{}'::jsonb, 'published',
                now() - interval '30 days'
                  + ((case when $5 then g * 7919 % $3::int else g end) / $4::int) * interval '250 milliseconds',
                now() - interval '30 days', now() - interval '30 days'
           from generate_series(0, $3::int - 1) g
         returning id, seq, tenant_id
       ), deliveries as (
         insert into outbox_deliveries (event_id, event_seq, tenant_id, consumer_name, status, attempt_count, processed_at)
         select id, seq, tenant_id, c, 'delivered', 1, now() from ev, unnest(array['Held.a', 'Held.b']) c
       )
       insert into consumer_inbox (event_id, consumer_name, tenant_id) select id, 'Held.b', tenant_id from ev`,
      [BENCH_TENANT, EVENT, total, PER_SETTLE, Boolean(process.env.SCATTER)],
    );
    await client.query('vacuum analyze event_outbox, outbox_deliveries, consumer_inbox');
    await holder.query('begin isolation level repeatable read');
    await holder.query('select 1');
    let positions = START;
    let deleted = 0;
    for (const size of SIZES) {
      while (deleted < size) {
        const s = purgeSettledBatch(n, 7, BATCH, positions);
        const [row] = (await client.query(s.text, [...s.values])).rows;
        deleted += row.deleted as number;
        positions = { ranges: row.ranges, ats: row.ats };
      }
      const forms: [string, { text: string; values: readonly unknown[] }][] = [
        [
          'two-argument form (from the oldest, as before)',
          {
            text: `select case when pg_try_advisory_xact_lock(hashtextextended($1, 0))
                               then ${n.purgeSettled}(now() - $2::float8 * interval '1 day', $3) end as deleted`,
            values: [n.retentionLock, 7, BATCH],
          },
        ],
        ['positioned form, no position (full scan)', purgeSettledBatch(n, 7, BATCH, START)],
        ['positioned form, from the position', purgeSettledBatch(n, 7, BATCH, positions)],
      ];
      for (const [form, statement] of forms) {
        let last = '';
        for (let run = 0; run < 3; run++) last = await explainRolledBack(client, statement);
        print(`  ${String(deleted).padStart(7)} deleted under the hold, ${form.padEnd(48)} ${last}`);
      }
    }
  } finally {
    await holder.end();
    await client.end();
    await close();
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
