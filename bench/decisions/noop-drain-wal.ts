/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/noop-drain-wal.ts`
 *
 * Where PostgreSQL's work in the no-op drain lives (issue 35, ADR 0804's addenda): a drain of EVENTS (default
 * 20,000) pending events × two no-op consumers, in TURNS (default 2) turns of VARIANTS (default
 * `library,graphile-worker`; also `raw`, the peers bench's batched relay, and `library fillfactor N`, the events
 * table's fillfactor set before the load), on an embedded PostgreSQL with `pg_walinspect`. Per event: events/s,
 * CPU of Node and of the drain's backends, and from `pg_get_wal_stats` over the drain's WAL: bytes, records,
 * full-page image bytes, and the records of each type above a tenth per event (heap inserts, updates — HOT ones
 * are `HOT_UPDATE` —, row locks, deletes; `Btree/INSERT_LEAF`: index entries inserted into logged tables).
 * WAL_DETAIL=1 prints every record type's count and bytes; RECORD_DETAIL=1 the records by relation and flags
 * (row locks by kind: a `LOCK_ONLY, EXCL_LOCK` without `KEYS_UPDATED` is the lock `heap_update` logs before
 * putting a row's new version on another page); STATEMENTS=1 loads `pg_stat_statements` and prints each drain's
 * statements by execution time, with buffers per event.
 */
import 'reflect-metadata';
import { createBenchApp } from '../harness/bench-app';
import { consumerClass, CONSUMER_NAMES } from '../harness/bench-consumers';
import { cpuSpentMs, readBackendCpu, type RowsQuery } from '../harness/backend-cpu';
import { BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { RawSession } from '../raw/raw-session';
import { drainBatched } from '../raw/batched-relay';
import { graphileWorkerPeer } from '../peers/graphile-worker.peer';
import { now } from '../harness/stats';
import {
  openDecisionDatabase,
  inTurns,
  drainFigures,
  compare,
  heading,
  print,
  exitWhenDone,
} from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const TURNS = Number(process.env.TURNS ?? 2);
const APP = 'decision-noop-wal';
/** STATEMENTS=1: pg_stat_statements loaded, and each drain's statements printed by execution time per event. */
const STATEMENTS = process.env.STATEMENTS === '1';
const VARIANTS = (process.env.VARIANTS ?? 'library,graphile-worker').split(',');

type Figures = Record<string, number>;

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    wal_level: 'replica',
    ...(STATEMENTS ? { shared_preload_libraries: 'pg_stat_statements' } : {}),
  });
  try {
    await db.sql('create extension if not exists pg_walinspect');
    if (STATEMENTS) await db.sql('create extension if not exists pg_stat_statements');
    if (VARIANTS.includes('graphile-worker')) await graphileWorkerPeer.install(db);
    heading(
      `No-op drain, WAL and CPU: ${EVENTS.toLocaleString('en-US')} events × 2 consumers`,
      serverVersion,
    );
    const figures = await inTurns(VARIANTS, TURNS, (variant) =>
      variant === 'graphile-worker' ? graphile(db) : variant === 'raw' ? raw(db) : library(db, variant),
    );
    for (const [figure, runs] of figures) compare(figure, '', runs);
  } finally {
    await close();
  }
}

async function library(db: BenchDatabase, variant: string): Promise<Figures> {
  const fillfactor = /fillfactor (\d+)/.exec(variant)?.[1] ?? '100';
  await db.sql(`alter table public.event_outbox set (fillfactor = ${fillfactor})`);
  await db.resetWithPendingEvents(EVENTS);
  const app = await createBenchApp({
    url: db.url,
    consumers: [consumerClass('no-db')],
    relay: { enabled: false },
    applicationName: APP,
    probe: false,
  });
  const from = await lsn(db);
  let figures;
  try {
    figures = await drainFigures(app, db, APP, EVENTS);
  } finally {
    await app.close();
  }
  return { ...figures, ...(await walFigures(db, from)) };
}

/** The raw batched relay of the peers bench (bench/raw/batched-relay.ts) at the library's batch size. */
async function raw(db: BenchDatabase): Promise<Figures> {
  await db.sql(`alter table public.event_outbox set (fillfactor = 100)`);
  await db.resetWithPendingEvents(EVENTS);
  const session = await RawSession.connect(db.url, APP);
  const query = db.sql.bind(db) as RowsQuery;
  const from = await lsn(db);
  let figures: Figures;
  try {
    const cpuBefore = await readBackendCpu(query, [APP]);
    const nodeBefore = process.cpuUsage();
    const began = now();
    const events = await drainBatched(session, {
      tenantId: BENCH_TENANT,
      batchSize: OUTBOX_DEFAULTS.relay.batchSize,
      consumers: CONSUMER_NAMES['no-db'],
    });
    const ms = now() - began;
    const node = process.cpuUsage(nodeBefore);
    const postgresMs = cpuSpentMs(cpuBefore, await readBackendCpu(query, [APP]));
    if (events !== EVENTS) throw new Error(`the raw relay drained ${events} of ${EVENTS} events`);
    figures = cpuFigures(ms, node, postgresMs);
  } finally {
    await session.end();
  }
  return { ...figures, ...(await walFigures(db, from)) };
}

function cpuFigures(ms: number, node: NodeJS.CpuUsage, postgresMs: number | null): Figures {
  return {
    'events/s': (EVENTS * 1000) / ms,
    'Node µs CPU/event': (node.user + node.system) / EVENTS,
    'PostgreSQL µs CPU/event': postgresMs === null ? Number.NaN : (postgresMs * 1000) / EVENTS,
  };
}

async function graphile(db: BenchDatabase): Promise<Figures> {
  await db.truncate();
  await graphileWorkerPeer.reset(db);
  await db.checkpoint();
  await graphileWorkerPeer.loadBacklog(db, EVENTS, CONSUMER_NAMES['no-db']);
  await db.sql('analyze');
  const query = db.sql.bind(db) as RowsQuery;
  let handled = 0;
  const from = await lsn(db);
  const cpuBefore = await readBackendCpu(query, [APP]);
  const nodeBefore = process.cpuUsage();
  const began = now();
  const consumers = await graphileWorkerPeer.startConsumers({
    url: db.url,
    consumers: CONSUMER_NAMES['no-db'],
    applicationName: APP,
    onHandled: () => void handled++,
  });
  let ms: number;
  let postgresMs: number | null;
  let node: NodeJS.CpuUsage;
  try {
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (handled >= 2 * EVENTS && (await graphileWorkerPeer.unsettled(query)) === 0) break;
      if (Date.now() > deadline) throw new Error(`graphile-worker handled ${handled} of ${2 * EVENTS}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    ms = now() - began;
    node = process.cpuUsage(nodeBefore);
    postgresMs = cpuSpentMs(cpuBefore, await readBackendCpu(query, [APP]));
  } finally {
    await consumers.stop();
  }
  return { ...cpuFigures(ms, node, postgresMs), ...(await walFigures(db, from)) };
}

async function lsn(db: BenchDatabase): Promise<string> {
  if (STATEMENTS) await db.sql('select pg_stat_statements_reset()');
  const [row] = await db.sql<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
  return row!.lsn;
}

/** Per event, from the WAL written since `from`: bytes, records, full-page images, and counts by record type. */
async function walFigures(db: BenchDatabase, from: string): Promise<Figures> {
  if (STATEMENTS) await printStatements(db);
  const to = await lsn(db);
  const rows = await db.sql<{ type: string; count: string; bytes: string; fpi: string }>(
    `select "resource_manager/record_type" as type, count::text, combined_size::text as bytes,
            fpi_size::text as fpi
       from pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) where count > 0`,
    [from, to],
  );
  const per = (n: number): number => n / EVENTS;
  const sum = (f: (r: (typeof rows)[number]) => number, types?: RegExp): number =>
    rows.filter((r) => !types || types.test(r.type)).reduce((s, r) => s + f(r), 0);
  const figures: Figures = {
    'WAL bytes/event': per(sum((r) => Number(r.bytes))),
    'WAL records/event': per(sum((r) => Number(r.count))),
    'full-page image bytes/event': per(sum((r) => Number(r.fpi))),
  };
  for (const r of rows)
    if (Number(r.count) >= EVENTS / 10) figures[`${r.type} records/event`] = per(Number(r.count));
  if (process.env.RECORD_DETAIL) {
    const records = await db.sql<{ rel: string; description: string; n: string }>(
      `select coalesce(c.relname, r.block_ref) as rel, regexp_replace(r.description, 'xmax: [0-9]+|off: [0-9]+', '', 'g') as description, count(*)::text as n
         from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
         left join pg_class c on c.relfilenode = substring(r.block_ref from 'rel [0-9]+/[0-9]+/([0-9]+)')::oid
        where r.record_type in ('LOCK', 'UPDATE', 'INSERT', 'INSERT_LEAF', 'HOT_UPDATE') group by 1, 2 order by count(*) desc limit 20`,
      [from, to],
    );
    for (const l of records) print(`    ${l.n.padStart(8)} ${l.rel} ${l.description}`);
  }
  if (process.env.WAL_DETAIL)
    for (const r of rows)
      print(`    ${r.type.padEnd(28)} ${r.count.padStart(8)} ${r.bytes.padStart(10)} fpi bytes ${r.fpi}`);
  return figures;
}

/** The drain's statements by execution time: calls per 100 events, µs per event, buffers per event. */
async function printStatements(db: BenchDatabase): Promise<void> {
  const rows = await db.sql<{ query: string; calls: number; exec: number; buffers: number }>(
    `select left(regexp_replace(query, '\\s+', ' ', 'g'), 70) as query, calls::float8 as calls,
            total_exec_time as exec, (shared_blks_hit + shared_blks_read + shared_blks_dirtied)::float8 as buffers
       from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())
        and query not like '%pg_stat%' and query not like '%pg_get_wal%' and query not like '%pg_current_wal%'
      order by total_exec_time desc limit 8`,
  );
  for (const r of rows)
    print(
      `    ${((r.calls * 100) / EVENTS).toFixed(2).padStart(7)} calls/100 ${((r.exec * 1000) / EVENTS).toFixed(1).padStart(6)} µs/event ` +
        `${(r.buffers / EVENTS).toFixed(1).padStart(6)} buffers/event  ${r.query}`,
    );
  await db.sql('select pg_stat_statements_reset()');
}

exitWhenDone(main());
