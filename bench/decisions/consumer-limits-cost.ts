/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/consumer-limits-cost.ts`
 *
 * What per-consumer limits cost (ADR 1104). First the claim statements, as consumer-pause-cost.ts measures them:
 * on EVENTS (default 20,000) pending events of one tenant and as many due deliveries, named statements (generic
 * plans), in turns, RUNS (default 300) times each, each run in a transaction rolled back — the fan-out and the
 * lean claim (100 events) as shipped and with their check for limited consumers taken out, and the due claim of
 * 100 of a consumer's 20,000 due deliveries with the consumer unlimited (the text as before), limited (a cap of
 * 1,000: room for all 100; its turn taken first), and limited with no room left; the due claim of a consumer rated per
 * tenant, per key (`rateLimit.perKey`, 100 keys, room in each) and per key with every key at its limit. Then an
 * unlimited consumer's drain, CPU per event
 * (Node + PostgreSQL): two unlimited consumers alone, and beside a limited consumer the relay also hosts
 * (`LimitedNeighbour`: a cap and a rate limit; `compareDrains`, DRAIN_EVENTS default 6,000, TURNS default 3;
 * DRAINS=0 leaves them out). `npm run bench -- --only=fairness` has the no-op drain's line with its goal.
 */
import 'reflect-metadata';
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import {
  claimDueDeliveries,
  claimNewEvents,
  consumerLimited,
  fanOutPendingEvents,
  lockConsumerLimits,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import { LimitedNeighbour } from '../harness/bench-consumers';
import { percentile } from '../harness/stats';
import { compareDrains, exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const RUNS = Number(process.env.RUNS ?? 300);
const DRAIN_EVENTS = Number(process.env.DRAIN_EVENTS ?? 6_000);
const TURNS = Number(process.env.TURNS ?? 3);
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
/** The tenant of the per-key lines: its own events and deliveries, so the other lines' scans do not see them. */
const KEYED_TENANT = '5b1e9c3a-0f2d-4e6b-8a7c-9d0e1f2a3b4c';
/** Keys of the per-key lines (`payload.k`). */
const KEYS = 100;
const NIL = '00000000-0000-0000-0000-000000000000';
const names = outboxNames();

/** The statement without its check for limited consumers (each `consumerLimited` made `false`). */
function withoutLimitCheck(statement: SqlStatement): SqlStatement {
  let text = statement.text;
  for (const alias of ['c', 'r']) text = text.split(consumerLimited(alias)).join('false');
  if (text === statement.text) throw new Error('the statement has no limit check to take out');
  return { ...statement, text };
}

/** One run in a transaction rolled back: `before` (untimed set-up statements' times count: they are the claim's). */
async function timeOnce(client: Client, name: string, steps: readonly SqlStatement[]): Promise<number> {
  await client.query('begin');
  const started = performance.now();
  for (const [i, step] of steps.entries())
    await client.query({ name: `${name}:${i}`, text: step.text, values: step.values as unknown[] });
  const elapsed = performance.now() - started;
  await client.query('rollback');
  return elapsed * 1000;
}

let compared = 0;

async function compareSteps(
  client: Client,
  label: string,
  variants: Record<string, readonly SqlStatement[]>,
): Promise<void> {
  const times = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
  // statement names stay short: PostgreSQL cuts them at 63 bytes
  const tag = `c${++compared}`;
  for (let i = 0; i < RUNS; i++)
    for (const [v, [variant, steps]] of Object.entries(variants).entries()) {
      const elapsed = await timeOnce(client, `${tag}v${v}`, steps);
      if (i >= 10) times.get(variant)!.push(elapsed); // after the generic plan settles
    }
  print(`  ${label}`);
  const [base] = [...times.values()].map((runs) =>
    percentile(
      [...runs].sort((a, b) => a - b),
      50,
    ),
  );
  for (const [variant, runs] of times) {
    const sorted = [...runs].sort((a, b) => a - b);
    const median = percentile(sorted, 50);
    print(
      `    ${variant.padEnd(34)} median ${median.toFixed(0)} µs, p90 ${percentile(sorted, 90).toFixed(0)} µs (${(median / base!).toFixed(3)}×)`,
    );
  }
}

async function statements(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    heading('consumer-limits-cost: the claim statements', serverVersion);
    await db.sql(
      `insert into outbox_consumers (name, event_patterns) values ('bench.a', '{bench.limits.v1}'), ('bench.b', '{bench.limits.v1}'),
         ('bench.capped', '{bench.other.v1}'), ('bench.full', '{bench.other.v1}')`,
    );
    // a cap with room for a whole claim, and one with none left (0: the option refuses it, the room is the same)
    await db.sql(`update outbox_consumers set concurrency = 1000 where name = 'bench.capped'`);
    await db.sql(`update outbox_consumers set concurrency = 0 where name = 'bench.full'`);
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status)
       select gen_random_uuid(), $1::uuid, 'bench.limits.v1', '{}', 'pending' from generate_series(1, $2::int)`,
      [TENANT, EVENTS],
    );
    // due rows of the consumer the due claim takes, nothing else due in the tenant
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, 'bench.capped', seq, 'pending' from event_outbox`,
    );
    await keyedRows(db);
    await db.sql('analyze');
    print(`  ${EVENTS.toLocaleString('en-US')} pending events and as many due deliveries; ${RUNS} runs each`);
    const claim = { tenantId: TENANT, liveWithinMs: 60_000, limit: 100, leaseToken: NIL, leaseMs: 30_000 };
    const fanOut = fanOutPendingEvents(names, {
      ...claim,
      inProcess: ['bench.a'],
      hosted: ['bench.a', 'bench.b'],
      tenantConsumers: [],
    });
    await compareSteps(client, 'fan-out (100 events)', {
      shipped: [fanOut],
      'no limit check': [withoutLimitCheck(fanOut)],
    });
    const lean = claimNewEvents(names, { ...claim, inProcess: ['bench.a', 'bench.b'] });
    await compareSteps(client, 'lean claim (100 events)', {
      shipped: [lean],
      'no limit check': [withoutLimitCheck(lean)],
    });
    const due = { tenantId: TENANT, limit: 100, leaseToken: NIL, leaseMs: 30_000 };
    await compareSteps(client, 'due claim (100 of its 20,000 due deliveries)', {
      'the consumer unlimited (as before)': [
        claimDueDeliveries(names, { ...due, consumers: ['bench.capped'] }),
      ],
      'the consumer limited, its turn first': [
        lockConsumerLimits(names, { tenantId: TENANT, consumers: ['bench.capped'] }),
        claimDueDeliveries(names, { ...due, consumers: ['bench.capped'], limited: ['bench.capped'] }),
      ],
      'a limited consumer with no room': [
        lockConsumerLimits(names, { tenantId: TENANT, consumers: ['bench.full'] }),
        claimDueDeliveries(names, { ...due, consumers: ['bench.full'], limited: ['bench.full'] }),
      ],
    });
    const keyed = { ...due, tenantId: KEYED_TENANT };
    await compareSteps(client, `due claim per key (100 of 20,000 due deliveries over ${KEYS} keys)`, {
      'the consumer limited per tenant (as before)': [
        lockConsumerLimits(names, { tenantId: KEYED_TENANT, consumers: ['bench.tenant-rated'] }),
        claimDueDeliveries(names, {
          ...keyed,
          consumers: ['bench.tenant-rated'],
          limited: ['bench.tenant-rated'],
        }),
      ],
      'the consumer limited per key, room in every key': [
        lockConsumerLimits(names, { tenantId: KEYED_TENANT, consumers: ['bench.keyed'] }),
        claimDueDeliveries(names, { ...keyed, consumers: ['bench.keyed'], limited: ['bench.keyed'] }),
      ],
      'every key at its limit (walks the due rows, claims none)': [
        lockConsumerLimits(names, { tenantId: KEYED_TENANT, consumers: ['bench.keyed-full'] }),
        claimDueDeliveries(names, {
          ...keyed,
          consumers: ['bench.keyed-full'],
          limited: ['bench.keyed-full'],
        }),
      ],
    });
  } finally {
    await client.end();
    await close();
  }
}

/**
 * The per-key lines' rows, in `KEYED_TENANT`: EVENTS events over `KEYS` keys (`payload.k`), each due to three
 * consumers rated 1,000,000 a second: per tenant, per key, and per key with every key's log full (entries dated a
 * day ahead, so that no claim drops them).
 */
async function keyedRows(db: Awaited<ReturnType<typeof openDecisionDatabase>>['db']): Promise<void> {
  await db.sql(
    `insert into outbox_consumers (name, event_patterns, rate_limit, rate_interval_ms, rate_per_tenant, rate_key)
     values ('bench.tenant-rated', '{bench.keyed.v1}', 1000000, 1000, true, null),
            ('bench.keyed', '{bench.keyed.v1}', 1000000, 1000, false, 'payload:k'),
            ('bench.keyed-full', '{bench.keyed.v1}', 1000000, 1000, false, 'payload:k')`,
  );
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status)
     select gen_random_uuid(), $1::uuid, 'bench.keyed.v1', json_build_object('k', i % $3::int), 'pending'
       from generate_series(1, $2::int) i`,
    [KEYED_TENANT, EVENTS, KEYS],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
     select e.id, e.tenant_id, c.name, e.seq, 'pending'
       from event_outbox e, unnest('{bench.tenant-rated,bench.keyed,bench.keyed-full}'::text[]) c(name)
      where e.tenant_id = $1`,
    [KEYED_TENANT],
  );
  await db.sql(
    `insert into outbox_consumer_key_starts (consumer_name, tenant_id, rate_key, started_at, n)
     select 'bench.keyed-full', $1, md5(k::text)::uuid, now() + interval '1 day', 1000000
       from generate_series(0, $2::int - 1) k`,
    [KEYED_TENANT, KEYS],
  );
}

exitWhenDone(
  (async () => {
    await statements();
    if (process.env.DRAINS === '0') return;
    await compareDrains(
      'consumer-limits-cost',
      {
        'two unlimited consumers': {},
        'beside a limited consumer': { consumers: [LimitedNeighbour] },
      },
      { events: DRAIN_EVENTS, turns: TURNS },
    );
  })(),
);
