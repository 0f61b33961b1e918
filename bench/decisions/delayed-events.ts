/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/delayed-events.ts`
 *
 * What the promotion of delayed events costs (ADR 1102). On EVENTS (default 20,000) pending events of one tenant:
 * the relay's promotion statement (`outbox_promote_scheduled`, in a transaction as the relay sends it) with
 * nothing scheduled, beside the relay's scan for due tenants and an empty round trip (`select 1`), in turns, RUNS
 * (default 400) times each; then with SCHEDULED (default 20,000) events scheduled, none due; then one promotion of
 * 1,000 due events (rolled back, BURSTS times). Median and p90 in µs, client-side (one connection, loopback),
 * and the time the server spent in each function per call (`track_functions`, in the same transaction).
 */
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { dueTenants, promoteScheduled, type SqlStatement } from '../../libs/outbox/src/store/sql';
import { percentile } from '../harness/stats';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const SCHEDULED = Number(process.env.SCHEDULED ?? 20_000);
const RUNS = Number(process.env.RUNS ?? 400);
const BURSTS = Number(process.env.BURSTS ?? 20);
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
const names = outboxNames();

/** One transaction as the relay's `relayQuery` sends it; returns the µs the statement took. */
async function timeOnce(client: Client, statement: SqlStatement, rollback = false): Promise<number> {
  await client.query('begin');
  const started = performance.now();
  await client.query({ text: statement.text, values: statement.values as unknown[] });
  const elapsed = performance.now() - started;
  await client.query(rollback ? 'rollback' : 'commit');
  return elapsed * 1000;
}

async function inTurns(client: Client, label: string, variants: Record<string, SqlStatement>): Promise<void> {
  const times = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
  // this process's CPU (user + system) per call, transaction included
  const cpu = new Map<string, number>(Object.keys(variants).map((k) => [k, 0]));
  for (let i = 0; i < RUNS; i++)
    for (const [variant, statement] of Object.entries(variants)) {
      const before = process.cpuUsage();
      const elapsed = await timeOnce(client, statement);
      const used = process.cpuUsage(before);
      if (i >= 10) {
        times.get(variant)!.push(elapsed);
        cpu.set(variant, cpu.get(variant)! + used.user + used.system);
      }
    }
  print(`  ${label}`);
  for (const [variant, runs] of times) {
    const sorted = [...runs].sort((a, b) => a - b);
    print(
      `    ${variant.padEnd(34)} median ${percentile(sorted, 50).toFixed(0)} µs, p90 ${percentile(sorted, 90).toFixed(0)} µs, ` +
        `Node CPU ${(cpu.get(variant)! / runs.length).toFixed(0)} µs per call`,
    );
  }
}

/** The server's time in each function per call (µs), from its transaction's function statistics. */
async function serverTimes(client: Client, label: string): Promise<void> {
  const functions = {
    promotion: { statement: promoteScheduled(names, 1000), signature: `${names.promoteScheduled}(integer)` },
    scan: { statement: dueTenants(names, 100, null), signature: `${names.dueTenants}(integer, uuid)` },
  };
  const times = new Map<string, number[]>(Object.keys(functions).map((k) => [k, []]));
  for (let i = 0; i < RUNS; i++)
    for (const [name, f] of Object.entries(functions)) {
      await client.query('begin');
      await client.query(`set local track_functions = 'pl'`);
      await client.query({ text: f.statement.text, values: f.statement.values as unknown[] });
      // the backend's pending counters may span several transactions until flushed: time over calls
      const { rows } = await client.query<{ ms: number }>(
        `select pg_stat_get_xact_function_total_time($1::regprocedure)
                / nullif(pg_stat_get_xact_function_calls($1::regprocedure), 0) as ms`,
        [f.signature],
      );
      await client.query('rollback');
      if (i >= 10) times.get(name)!.push(rows[0]!.ms * 1000);
    }
  print(`  ${label}: time in the function, server side`);
  for (const [name, runs] of times) {
    const sorted = [...runs].sort((a, b) => a - b);
    print(
      `    ${name.padEnd(34)} median ${percentile(sorted, 50).toFixed(0)} µs, p90 ${percentile(sorted, 90).toFixed(0)} µs`,
    );
  }
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    heading('delayed-events: the promotion of delayed events', serverVersion);
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status)
       select gen_random_uuid(), $1::uuid, 'bench.delay.v1', '{}', 'pending' from generate_series(1, $2::int)`,
      [TENANT, EVENTS],
    );
    await db.sql('analyze');
    print(`  ${EVENTS.toLocaleString('en-US')} pending events of one tenant; ${RUNS} runs each, in turns`);
    const variants = {
      'promotion (outbox_promote_scheduled)': promoteScheduled(names, 1000),
      'scan (outbox_due_tenants)': dueTenants(names, 100, null),
      'empty round trip (select 1)': { text: 'select 1', values: [] },
    };
    await inTurns(client, 'nothing scheduled', variants);
    await serverTimes(client, 'nothing scheduled');
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliver_at)
       select gen_random_uuid(), $1::uuid, 'bench.delay.v1', '{}', 'scheduled', now() + interval '1 day' + i * interval '1 ms'
         from generate_series(1, $2::int) i`,
      [TENANT, SCHEDULED],
    );
    await db.sql('analyze');
    await inTurns(client, `${SCHEDULED.toLocaleString('en-US')} scheduled, none due`, variants);
    await serverTimes(client, `${SCHEDULED.toLocaleString('en-US')} scheduled, none due`);
    await db.sql(
      `update event_outbox set deliver_at = now() - interval '1 second'
        where id in (select id from event_outbox where status = 'scheduled' order by deliver_at limit 1000)`,
    );
    const bursts: number[] = [];
    for (let i = 0; i < BURSTS; i++) bursts.push(await timeOnce(client, promoteScheduled(names, 1000), true));
    bursts.sort((a, b) => a - b);
    print(
      `  1,000 due of ${SCHEDULED.toLocaleString('en-US')} scheduled, promoted in one call (rolled back, ${BURSTS} times): median ${(percentile(bursts, 50) / 1000).toFixed(1)} ms, p90 ${(percentile(bursts, 90) / 1000).toFixed(1)} ms`,
    );
  } finally {
    await client.end();
    await close();
  }
}

exitWhenDone(main());
