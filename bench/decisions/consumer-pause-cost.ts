/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/consumer-pause-cost.ts`
 *
 * What the pause check costs the claims when nothing is paused (ADR 1101). On EVENTS (default 20,000) pending
 * events of one tenant, two live consumers in the registry, and as many due pending deliveries: each claim
 * statement as shipped and the same text without the pause check (its array an empty literal, its anti-join `true`), as
 * named statements (generic plans after five runs, as the relay's), in turns, RUNS (default 400) times each, each
 * run in a transaction rolled back: the fan-out (100 events, one consumer in-process, one hosted), the lean claim
 * (100 events, both in-process), the due claim (100 deliveries). Then `outbox_due_tenants` with no pause and with
 * the due deliveries' consumer paused, and the due claim while that consumer is paused. Median and p90 in µs, client-side (one connection, loopback).
 */
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import {
  claimDueDeliveries,
  claimNewEvents,
  fanOutPendingEvents,
  deliveryNotPaused,
  pausedConsumers,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import { percentile } from '../harness/stats';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const RUNS = Number(process.env.RUNS ?? 400);
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
const NIL = '00000000-0000-0000-0000-000000000000';
const names = outboxNames();

/** The statement without the pause check: its array of paused consumers an empty literal, its anti-join `true`. */
function withoutPauseCheck(statement: SqlStatement): SqlStatement {
  let text = statement.text;
  text = text.split(pausedConsumers(names, '$1::uuid')).join(`'{}'::text[]`);
  for (const alias of ['d', 's']) text = text.split(deliveryNotPaused(names, alias)).join('true');
  if (text === statement.text) throw new Error('the statement has no pause check to take out');
  return { ...statement, text };
}

async function timeOnce(client: Client, name: string, statement: SqlStatement): Promise<number> {
  await client.query('begin');
  const started = performance.now();
  await client.query({ name, text: statement.text, values: statement.values as unknown[] });
  const elapsed = performance.now() - started;
  await client.query('rollback');
  return elapsed * 1000;
}

async function compareStatement(client: Client, label: string, shipped: SqlStatement): Promise<void> {
  const variants = { shipped, 'no pause check': withoutPauseCheck(shipped) };
  const times = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
  for (let i = 0; i < RUNS; i++)
    for (const [variant, statement] of Object.entries(variants)) {
      const elapsed = await timeOnce(client, `${label}:${variant}`, statement);
      if (i >= 10) times.get(variant)!.push(elapsed); // after the generic plan settles
    }
  print(`  ${label}`);
  for (const [variant, runs] of times) {
    const sorted = [...runs].sort((a, b) => a - b);
    print(
      `    ${variant.padEnd(16)} median ${percentile(sorted, 50).toFixed(0)} µs, p90 ${percentile(sorted, 90).toFixed(0)} µs`,
    );
  }
}

async function timeDueTenants(client: Client, label: string): Promise<void> {
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await client.query(`select * from ${names.dueTenants}(10, null)`);
    if (i >= 10) runs.push((performance.now() - started) * 1000);
  }
  runs.sort((a, b) => a - b);
  print(
    `    ${label.padEnd(28)} median ${percentile(runs, 50).toFixed(0)} µs, p90 ${percentile(runs, 90).toFixed(0)} µs`,
  );
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    heading('consumer-pause-cost: the claims’ pause check when nothing is paused', serverVersion);
    await db.sql(
      `insert into outbox_consumers (name, event_patterns) values ('bench.a', '{bench.pause.v1}'), ('bench.b', '{bench.pause.v1}')`,
    );
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status)
       select gen_random_uuid(), $1::uuid, 'bench.pause.v1', '{}', 'pending' from generate_series(1, $2::int)`,
      [TENANT, EVENTS],
    );
    // the deliveries the due claim finds: an earlier batch's rows for a consumer hosted here, due now
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, 'bench.due', seq, 'pending' from event_outbox`,
    );
    await db.sql('analyze');
    print(
      `  ${EVENTS.toLocaleString('en-US')} pending events and due deliveries of one tenant; ${RUNS} runs each`,
    );
    const dueClaim = claimDueDeliveries(names, {
      tenantId: TENANT,
      consumers: ['bench.due'],
      limit: 100,
      leaseToken: NIL,
      leaseMs: 30_000,
    });
    const claim = { tenantId: TENANT, liveWithinMs: 60_000, limit: 100, leaseToken: NIL, leaseMs: 30_000 };
    await compareStatement(
      client,
      'fan-out (100 events)',
      fanOutPendingEvents(names, {
        ...claim,
        inProcess: ['bench.a'],
        hosted: ['bench.a', 'bench.b'],
        tenantConsumers: [],
      }),
    );
    await compareStatement(
      client,
      'lean claim (100 events)',
      claimNewEvents(names, { ...claim, inProcess: ['bench.a', 'bench.b'] }),
    );
    await compareStatement(client, 'due claim (100 deliveries)', dueClaim);
    print('  outbox_due_tenants (one tenant with pending events and due deliveries)');
    await timeDueTenants(client, 'nothing paused');
    await db.sql(
      `insert into outbox_consumer_pauses (consumer_name, tenant_id) values ('bench.other', null)`,
    );
    await timeDueTenants(client, 'another consumer paused');
    await db.sql(
      `insert into outbox_consumer_pauses (consumer_name, tenant_id) values ('bench.due', $1::uuid)`,
      [TENANT],
    );
    await timeDueTenants(client, 'the due rows’ consumer paused');
    await compareStatement(client, 'due claim, its consumer paused', dueClaim);
  } finally {
    await client.end();
    await close();
  }
}

exitWhenDone(main());
