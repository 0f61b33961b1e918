/**
 * `DATABASE_URL=… [SETTLED=20000,60000,120000] [EVERY=2000] node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/held-oldest-pending.ts`
 *
 * What the oldest pending reading (`outbox_oldest_pending_age`: the health check, the metrics gauge, the doctor)
 * costs under a held snapshot (ADR 1206, addendum "The oldest pending reading starts past the settled"): a second
 * connection holds `begin isolation level repeatable read; select 1`, then events of one tenant are inserted and
 * settled as the relay settles them (100 per transaction, `published`), with a reading of the positioned form after
 * every EVERY events (a health check every 5 s at 400 events/s), three quiet tenants beside it with one pending
 * event each. At 20k, 60k and 120k settled, with 20 new events pending, `EXPLAIN (ANALYZE, BUFFERS)` of a reading,
 * rolled back, the last of three runs: the one-argument form (before), the positioned form without positions (a
 * reader's first reading) and from the positions the readings reached; and both forms' answers, in one
 * transaction (one `now()`), which must be equal.
 */
import type { Client } from 'pg';
import { BENCH_TENANT } from '../harness/bench-database';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { oldestPendingAge, type OldestPendingAgeRow } from '../../libs/outbox/src/store/sql/pending-age';
import { PendingAgeReadings } from '../../libs/outbox/src/store/pending-age-readings';
import { connectTwo, explainRolledBack, heading, openDecisionDatabase, print } from './decision-server';

const SIZES = (process.env.SETTLED ?? '20000,60000,120000').split(',').map(Number);
const EVERY = Number(process.env.EVERY ?? 2000);
const PER_SETTLE = 100;
const EVENT = 'bench.held-oldest-pending.v1';
const QUIET = [
  '0a000000-0000-4000-8000-000000000001',
  '7a000000-0000-4000-8000-000000000002',
  'fa000000-0000-4000-8000-000000000003',
];

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  heading(
    `The oldest pending reading under a held snapshot (ADR 1206, addendum "The oldest pending reading starts past the settled"), a reading every ${EVERY.toLocaleString('en-US')} settled`,
    serverVersion,
  );
  const n = outboxNames();
  const [client, holder] = await connectTwo(db.url);
  const insert = (tenant: string, count: number) =>
    client.query(
      `insert into event_outbox (id, tenant_id, event_name, payload, created_at)
       select gen_random_uuid(), $1::uuid, $2, '{}'::jsonb, now() - interval '1 minute'
         from generate_series(1, $3::int)`,
      [tenant, EVENT, count],
    );
  const settle = async (): Promise<void> => {
    for (;;) {
      const { rowCount } = await client.query(
        `update event_outbox set status = 'published', published_at = now(), updated_at = now()
          where id in (select id from event_outbox where tenant_id = $1 and status = 'pending' order by seq limit $2)`,
        [BENCH_TENANT, PER_SETTLE],
      );
      if (!rowCount) return;
    }
  };
  try {
    for (const tenant of QUIET) await insert(tenant, 1);
    await client.query('vacuum analyze event_outbox');
    await holder.query('begin isolation level repeatable read');
    await holder.query('select 1');
    const readings = new PendingAgeReadings();
    const read = async (): Promise<void> => {
      const s = readings.statement(n, 3_600_000);
      readings.record((await client.query<OldestPendingAgeRow>(s.text, [...s.values])).rows[0]!);
    };
    let settled = 0;
    for (const size of SIZES) {
      while (settled < size) {
        await insert(BENCH_TENANT, EVERY);
        await settle();
        settled += EVERY;
        await read();
        if (process.env.TRACE) print(JSON.stringify(readings.current));
      }
      await insert(BENCH_TENANT, 20);
      const oneArgument = {
        text: `select ${n.oldestPendingAge}($1 * interval '1 millisecond') as seconds`,
        values: [3_600_000],
      };
      const forms: [string, { text: string; values: readonly unknown[] }][] = [
        ['one-argument form (before)', oneArgument],
        ['positioned form, no positions (a first reading)', oldestPendingAge(n, 3_600_000)],
        ['positioned form, from the positions', readings.statement(n, 3_600_000)],
      ];
      for (const [form, statement] of forms) {
        let last = '';
        for (let run = 0; run < 3; run++) last = await explainRolledBack(client, statement);
        print(`  ${String(settled).padStart(7)} settled under the hold, ${form.padEnd(50)} ${last}`);
      }
      print(
        `  ${''.padStart(7)} answers in one transaction: ${await answers(client, oneArgument, readings)}`,
      );
      await settle();
    }
  } finally {
    await holder.end();
    await client.end();
    await close();
  }
}

/** Both forms' ages in one transaction (one `now()`): equal, or the script says so. */
async function answers(
  client: Client,
  oneArgument: { text: string; values: readonly unknown[] },
  readings: PendingAgeReadings,
): Promise<string> {
  await client.query('begin');
  try {
    const before = (await client.query<{ seconds: number }>(oneArgument.text, [...oneArgument.values]))
      .rows[0]!;
    const s = readings.statement(outboxNames(), 3_600_000);
    const after = (await client.query<OldestPendingAgeRow>(s.text, [...s.values])).rows[0]!;
    const same = before.seconds === after.seconds ? 'equal' : 'DIFFERENT';
    return `${before.seconds} s (one-argument form), ${after.seconds} s (from the positions): ${same}`;
  } finally {
    await client.query('rollback');
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
