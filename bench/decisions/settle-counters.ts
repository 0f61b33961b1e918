/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/settle-counters.ts`
 *
 * Why an outcome settles its events from counters (`deliveries_open = deliveries_open - closed`) rather than by
 * counting their delivery rows again (ADR 0603). Over HISTORY (default 200,000) published events with three
 * delivery rows each, a batch of 100 processing events with three leased deliveries each, two of which are
 * recorded delivered:
 * 1. what each form leaves in `deliveries_open` — in one statement (as the outcome is), a recount reads the
 *    statement's snapshot, taken before its own delivery updates;
 * 2. two relays recording different deliveries of one event at the same time (READ COMMITTED, the second
 *    waiting for the first's row lock): what the event is left with;
 * 3. the time per batch of the counter form against a recount sent as a statement of its own after the update
 *    (the form that is right in one session), in turns, each run rolled back.
 */
import 'reflect-metadata';
import { Client } from 'pg';
import { BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { median, now, waitUntil } from '../harness/stats';
import { compare, heading, inTurns, openDecisionDatabase, print } from './decision-server';

const HISTORY = Number(process.env.HISTORY ?? 200_000);
const BATCH = 100;
const RUNS = Number(process.env.RUNS ?? 30);
const TURNS = Number(process.env.TURNS ?? 2);
const CONSUMERS = ['a', 'b', 'c'];

/** Marks deliveries `$1` delivered, then settles their events by counter or by recount (`$1`: bigint[]). */
function settleStatement(form: 'counter' | 'recount'): string {
  const open =
    form === 'counter'
      ? 'e.deliveries_open - p.closed'
      : `(select count(*) from outbox_deliveries d where d.event_id = e.id and d.status not in ('delivered', 'dead'))`;
  return `with updated as (
            update outbox_deliveries set status = 'delivered', processed_at = now(), lease_token = null
             where id = any($1::bigint[]) returning event_id
          ), p as (select event_id, count(*)::int as closed from updated group by event_id)
          update event_outbox e
             set deliveries_open = ${open},
                 status = case when ${open} = 0 then 'published' else 'processing' end
            from p where e.id = p.event_id`;
}

/** The recount as a statement of its own, after `settleStatement('counter')`'s delivery update alone. */
const UPDATE_ONLY = `update outbox_deliveries set status = 'delivered', processed_at = now(), lease_token = null
                      where id = any($1::bigint[])`;
const RECOUNT_ALONE = `update event_outbox e
                          set deliveries_open = o.open, status = case when o.open = 0 then 'published' else 'processing' end
                         from (select d.event_id, count(*) filter (where d.status not in ('delivered', 'dead'))::int as open
                                 from outbox_deliveries d where d.event_id = any($1::uuid[]) group by d.event_id) o
                        where e.id = o.event_id`;

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `Settling a batch of ${BATCH} events over ${HISTORY.toLocaleString('en-US')} events of history`,
      serverVersion,
    );
    await db.loadPublishedHistory(HISTORY, CONSUMERS);
    const batch = await loadBatch(db);
    await db.sql('vacuum analyze');

    print('  1. deliveries_open after recording 2 of 3 deliveries per event, in one statement (right: 1)');
    for (const form of ['counter', 'recount'] as const) {
      await db.sql('begin');
      await db.sql(settleStatement(form), [batch.twoOfThree]);
      const [row] = await db.sql<{ right: number }>(
        `select count(*) filter (where deliveries_open = 1)::int as right from event_outbox where id = any($1::uuid[])`,
        [batch.events],
      );
      await db.sql('rollback');
      print(`    ${form.padEnd(34)} ${row!.right} of ${BATCH} events right`);
    }

    print('  2. two relays record the two last deliveries of one event at once (right: 0 open, published)');
    for (const form of ['counter', 'recount, a statement of its own'] as const)
      print(`    ${form.padEnd(34)} ${await race(db, form, batch)}`);

    const figures = await inTurns(
      ['counter (as shipped)', 'recount, a statement of its own'] as const,
      TURNS,
      async (form) => {
        const times: number[] = [];
        for (let i = 0; i < RUNS; i++) {
          await db.sql('begin');
          const began = now();
          if (form === 'counter (as shipped)') await db.sql(settleStatement('counter'), [batch.twoOfThree]);
          else {
            await db.sql(UPDATE_ONLY, [batch.twoOfThree]);
            await db.sql(RECOUNT_ALONE, [batch.events]);
          }
          times.push(now() - began);
          await db.sql('rollback');
        }
        await db.sql('vacuum public.event_outbox, public.outbox_deliveries');
        return { ms: median(times) };
      },
    );
    compare(
      `3. time to record and settle a batch of ${BATCH} (median of ${RUNS} runs)`,
      'ms',
      figures.get('ms')!,
    );
  } finally {
    await close();
  }
}

interface Batch {
  events: string[];
  /** Two of each event's three deliveries. */
  twoOfThree: string[];
  /** Each event's two last open deliveries, one list per relay. */
  lastTwo: [string[], string[]];
}

/** BATCH processing events with three leased deliveries each. */
async function loadBatch(db: BenchDatabase): Promise<Batch> {
  const rows = await db.sql<{ event_id: string; ids: string[] }>(
    `with ev as (
       insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
       select gen_random_uuid(), $1, 'bench.batch.v1', '{}', 'processing', 3 from generate_series(1, $2)
       returning id, seq
     ), d as (
       insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, lease_token, lease_expires_at)
       select ev.id, $1, c, ev.seq, 'processing', 1, gen_random_uuid(), now() + interval '1 hour'
         from ev cross join unnest($3::text[]) c
       returning id, event_id, consumer_name
     )
     select event_id, array_agg(id::text order by consumer_name) as ids from d group by event_id`,
    [BENCH_TENANT, BATCH, CONSUMERS],
  );
  return {
    events: rows.map((r) => r.event_id),
    twoOfThree: rows.flatMap((r) => r.ids.slice(0, 2)),
    lastTwo: [rows.map((r) => r.ids[1]!), rows.map((r) => r.ids[2]!)],
  };
}

type RaceForm = 'counter' | 'recount, a statement of its own';

/** Records `deliveries` delivered and settles their events, in the form given, on `client`. */
async function settle(client: Client, form: RaceForm, deliveries: string[], events: string[]): Promise<void> {
  if (form === 'counter') {
    await client.query(settleStatement('counter'), [deliveries]);
    return;
  }
  await client.query(UPDATE_ONLY, [deliveries]);
  await client.query(RECOUNT_ALONE, [events]);
}

/**
 * Relay 1 records delivery b of the first event and settles; relay 2 records delivery c and settles while
 * relay 1 has not committed, so that it waits for the event's row lock; then relay 1 commits, then relay 2.
 * Delivery a is recorded first, so b and c are the last two open; everything is set back afterwards.
 */
async function race(db: BenchDatabase, form: RaceForm, batch: Batch): Promise<string> {
  const event = batch.events[0]!;
  const [a] = await db.sql<{ id: string }>(
    `select id::text from outbox_deliveries where event_id = $1 and consumer_name = 'a'`,
    [event],
  );
  await db.sql(settleStatement('counter'), [[a!.id]]);
  const relays = await Promise.all(
    [0, 1].map(async () => {
      const client = new Client({ connectionString: db.url });
      await client.connect();
      return client;
    }),
  );
  try {
    const [first, second] = relays as [Client, Client];
    const [{ pid }] = (await second.query<{ pid: number }>('select pg_backend_pid() as pid')).rows as [
      { pid: number },
    ];
    await first.query('begin');
    await second.query('begin');
    await settle(first, form, [batch.lastTwo[0][0]!], [event]);
    const waiting = settle(second, form, [batch.lastTwo[1][0]!], [event]);
    const blocked = await waitUntil(async () => {
      const [row] = await db.sql<{ waits: boolean }>(
        `select wait_event_type = 'Lock' as waits from pg_stat_activity where pid = $1`,
        [pid],
      );
      return row?.waits === true;
    }, 10_000);
    if (!blocked) throw new Error('relay 2 never waited for relay 1’s row lock');
    await first.query('commit');
    await waiting;
    await second.query('commit');
    const [row] = await db.sql<{ deliveries_open: number; status: string }>(
      'select deliveries_open, status from event_outbox where id = $1',
      [event],
    );
    return `${row!.deliveries_open} open, ${row!.status}`;
  } finally {
    await Promise.all(relays.map((c) => c.end()));
    await db.sql(
      `update outbox_deliveries set status = 'processing', processed_at = null where event_id = $1`,
      [event],
    );
    await db.sql(`update event_outbox set deliveries_open = 3, status = 'processing' where id = $1`, [event]);
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
