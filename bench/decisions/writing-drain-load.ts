/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/writing-drain-load.ts`
 * (DATABASE_URL unset: an embedded PostgreSQL with pg_stat_statements)
 *
 * Where a drain whose two consumers each write a row spends its CPU, idle and under the peers' loaded variant's
 * background load (one child per core, 10 ms busy / 10 ms idle): the library's `drain()` (as shipped: claims
 * grow) and the raw batched relay (batches of `relay.batchSize`), in turns, TURNS (default 3) times, EVENTS
 * (default 8,000) each. Per event: Node and PostgreSQL CPU, statements (pg_stat_statements, by kind), claims,
 * WAL bytes, and the backends' bytes read and written (/proc/<pid>/io: the socket's and any file I/O); then one
 * counted run of the library per load (the round-trip probe on) for its round trips per event.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { BackgroundLoad } from '../harness/background-load';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { CONSUMER_NAMES, consumerClass, INSERT_EFFECT_SQL } from '../harness/bench-consumers';
import { cpuSpentMs, readBackendCpu } from '../harness/backend-cpu';
import { now } from '../harness/stats';
import { drainBatched } from '../raw/batched-relay';
import { RawSession } from '../raw/raw-session';
import { compare, heading, openDecisionDatabase, print } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 8_000);
const TURNS = Number(process.env.TURNS ?? 3);
const APP = 'decision-writing-load';
const SYSTEMS = ['library', 'raw'] as const;
type System = (typeof SYSTEMS)[number];

const KINDS: readonly [(text: string) => boolean, string][] = [
  [(t) => t.includes('with fresh as'), 'claim'],
  [(t) => t.includes('with retry as'), 'claim'],
  [(t) => t.includes('with o as'), 'outcome'],
  [(t) => t.includes('outbox_due_tenants'), 'due-tenant scan'],
  [(t) => t.includes('$outbox_guard$'), 'guard'],
  [(t) => t.includes('set_config(') || t.includes('plan_cache_mode'), 'settings'],
  [(t) => /^\s*(release )?savepoint/i.test(t), 'savepoints'],
  [(t) => /^\s*(begin|start transaction|commit|rollback)\b/i.test(t), 'begin / commit'],
  [(t) => t === INSERT_EFFECT_SQL, 'handler insert'],
  [(t) => t.includes('from unnest($1::uuid[], $2::uuid[], $3::bigint[]) as ev'), 'outcome'],
  [(t) => t.includes('for update skip locked'), 'claim'],
];

async function backendIo(db: BenchDatabase): Promise<{ read: number; written: number }> {
  const rows = await db.sql<{ pid: number }>('select pid from pg_stat_activity where application_name = $1', [
    APP,
  ]);
  let read = 0;
  let written = 0;
  for (const { pid } of rows) {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    read += Number(/rchar: (\d+)/.exec(io)![1]);
    written += Number(/wchar: (\d+)/.exec(io)![1]);
  }
  return { read, written };
}

async function statementKinds(db: BenchDatabase): Promise<Map<string, number>> {
  const rows = await db.sql<{ query: string; calls: string; ms: number }>(
    `select query, calls::text, total_exec_time + total_plan_time as ms from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())`,
  );
  const kinds = new Map<string, number>();
  for (const row of rows) {
    if (row.query.includes('pg_stat_') || row.query.includes('current_database()')) continue;
    const kind = KINDS.find(([m]) => m(row.query))?.[1] ?? row.query.replace(/\s+/g, ' ').slice(0, 40);
    kinds.set(kind, (kinds.get(kind) ?? 0) + Number(row.calls));
    kinds.set(`${kind} µs`, (kinds.get(`${kind} µs`) ?? 0) + row.ms * 1000);
  }
  return kinds;
}

async function drainOnce(db: BenchDatabase, system: System, probe = false): Promise<Record<string, number>> {
  await db.resetWithPendingEvents(EVENTS);
  const query = db.sql.bind(db) as Parameters<typeof readBackendCpu>[0];
  let drain: () => Promise<void>;
  let close: () => Promise<void>;
  let roundTrips: () => number;
  if (system === 'library') {
    const app = await createBenchApp({
      url: db.url,
      consumers: [consumerClass('db-write-all')],
      relay: { enabled: false },
      applicationName: APP,
      probe,
    });
    await Promise.all(Array.from({ length: 4 }, () => app.dataSource.query('select 1')));
    app.probe.take();
    drain = async () => {
      const drained = await app.relay.drain();
      if (drained.eventsClaimed !== EVENTS) throw new Error(`drained ${drained.eventsClaimed}`);
    };
    roundTrips = () => app.probe.take().total;
    close = () => app.close();
  } else {
    const raw = await RawSession.connect(db.url, APP);
    drain = async () => {
      const n = await drainBatched(raw, {
        tenantId: BENCH_TENANT,
        batchSize: OUTBOX_DEFAULTS.relay.batchSize,
        consumers: CONSUMER_NAMES['db-write-all'],
      });
      if (n !== EVENTS) throw new Error(`raw drained ${n}`);
    };
    roundTrips = () => raw.queries;
    close = () => raw.end();
  }
  try {
    await db.sql('select pg_stat_statements_reset()');
    const wal = await db.walPosition();
    const io = await backendIo(db);
    const cpuBefore = await readBackendCpu(query, [APP]);
    const nodeBefore = process.cpuUsage();
    const began = now();
    await drain();
    const ms = now() - began;
    const node = process.cpuUsage(nodeBefore);
    const pgMs = cpuSpentMs(cpuBefore, await readBackendCpu(query, [APP]));
    const trips = roundTrips();
    const ioAfter = await backendIo(db);
    const walBytes = await db.walBytesSince(wal);
    const kinds = await statementKinds(db);
    const statements = [...kinds].filter(([k]) => !k.endsWith(' µs')).reduce((a, [, b]) => a + b, 0);
    const figures: Record<string, number> = {
      'events/s': (EVENTS * 1000) / ms,
      'Node µs/event': (node.user + node.system) / EVENTS,
      'PostgreSQL µs/event': ((pgMs ?? NaN) * 1000) / EVENTS,
      'total µs/event': (node.user + node.system) / EVENTS + ((pgMs ?? NaN) * 1000) / EVENTS,
      'statements/event': statements / EVENTS,
      'events/claim': EVENTS / ((kinds.get('claim') ?? NaN) - (system === 'raw' ? 1 : 0)),
      'WAL B/event': walBytes / EVENTS,
      'backend read B/event': (ioAfter.read - io.read) / EVENTS,
      'backend written B/event': (ioAfter.written - io.written) / EVENTS,
    };
    if (system === 'raw' || probe) figures['round trips/event'] = trips / EVENTS;
    for (const [kind, calls] of kinds) figures[`  ${kind}/event`] = calls / EVENTS;
    return figures;
  } finally {
    await close();
  }
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track_utility': 'on',
    'pg_stat_statements.track_planning': 'on',
  });
  try {
    await db.sql('create extension if not exists pg_stat_statements');
    heading(
      `Writing drain (each of two consumers writes a row), ${EVENTS} events, idle and loaded`,
      serverVersion,
    );
    for (const loaded of (process.env.LOADS ?? 'idle,loaded').split(',').map((l) => l === 'loaded')) {
      const load = loaded ? BackgroundLoad.start({ busyMs: 10, idleMs: 10 }) : null;
      try {
        const runs = new Map<string, Map<string, number[]>>();
        for (let turn = 0; turn < TURNS; turn++) {
          const order = turn % 2 === 0 ? SYSTEMS : [...SYSTEMS].reverse();
          for (const system of order) {
            const figures = await drainOnce(db, system);
            for (const [figure, value] of Object.entries(figures)) {
              const bySystem = runs.get(figure) ?? new Map<string, number[]>(SYSTEMS.map((s) => [s, []]));
              bySystem.get(system)!.push(value);
              runs.set(figure, bySystem);
            }
          }
        }
        print(`\n${loaded ? 'LOADED' : 'IDLE'}`);
        for (const [figure, bySystem] of runs) compare(figure, '', bySystem);
        const counted = await drainOnce(db, 'library', true);
        print(
          `  library counted run: round trips/event ${counted['round trips/event']!.toFixed(3)}, ` +
            `events/claim ${counted['events/claim']!.toFixed(1)}, statements/event ${counted['statements/event']!.toFixed(3)}`,
        );
      } finally {
        await load?.stop();
      }
    }
  } finally {
    await close();
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
