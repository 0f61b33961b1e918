/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/floor-reading-ranges.ts`
 *
 * Whether the claims' floor reading (ADR 1207, addendum "A floor reading from the open floor") grows with the
 * settled ranges kept. Three partitioned databases side by side on one server: 8 daily ranges (4 days back, 3
 * ahead), 10 hourly ranges (6 hours back, 3 ahead) and 100 hourly ranges (96 hours back, 3 ahead). Each holds
 * EVENTS (default 2,000) pending events of one tenant made now (today's range) with a due delivery each, and one
 * settled event with a dead delivery in its oldest range. Per database, one warm call (called twice before on the
 * session: its plans made) under `EXPLAIN (ANALYZE, BUFFERS)`, whose shared buffers (hit + read) count what the
 * function's statements do — deterministic, where times are not:
 *
 * - `outbox_claim_floor(margin)`, sql/0035: every range older than the margin, at each reading (before);
 * - the three-argument form without an open floor: every range, what the relay reads once every `fullScanMs`;
 * - the three-argument form from its own open floor and `xmin` (what the relay reads every `refreshMs`, after);
 * - the same from the oldest range: what "dead deliveries count as open" would read with the one dead delivery
 *   in the oldest range (the alternative not taken);
 * - the writers' part (rolled back): the `outbox_reopened` row of a replay or a backfill's chunk, and its prune.
 *
 * Then the median of RUNS (default 200) calls of each reading, client-side, in turns (times: noisy on a shared
 * machine; the buffers decide).
 */
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { claimFloorReading, reopenedMark, type SqlStatement } from '../../libs/outbox/src/store/sql';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import { BenchDatabase } from '../harness/bench-database';
import { percentile } from '../harness/stats';
import { exitWhenDone, heading, openDecisionDatabase, print, insertEventsNow } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 2_000);
const RUNS = Number(process.env.RUNS ?? 200);
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
const names = outboxNames();
/** The relay's margin of the claims' floor (RelayPolicy.claimFloor). */
const MARGIN_MS = 600_000;

const LAYOUTS = {
  '8 daily ranges': { width: '1 day', back: 4 * 86_400_000 },
  '10 hourly ranges': { width: '1 hour', back: 6 * 3_600_000 },
  '100 hourly ranges': { width: '1 hour', back: 96 * 3_600_000 },
} as const;
type Layout = keyof typeof LAYOUTS;

/** Converts `db` with `layout`'s ranges and fills it. */
async function prepare(db: BenchDatabase, layout: Layout): Promise<void> {
  const { width, back } = LAYOUTS[layout];
  const start = new Date(Date.now() - back);
  start.setUTCMinutes(0, 0, 0);
  if (width === '1 day') start.setUTCHours(0);
  const statements = partitionedLayoutSql('public', { width, ahead: 3, start: start.toISOString() })
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('--'));
  for (const statement of statements) await db.sql(statement);
  await insertEventsNow(db, {
    tenantId: TENANT,
    eventName: 'bench.floor.v1',
    status: 'processing',
    count: EVENTS,
    consumer: 'bench.due',
  });
  // a settled event of the oldest range, dead for one consumer
  const [row] = await db.sql<{ id: string }>(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_dead, failed_at)
     values (outbox_uuid_at($1::timestamptz + interval '1 minute'), $2, 'bench.floor.v1', '{}', 'failed', 1, now())
     returning id`,
    [start.toISOString(), TENANT],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count)
     select id, tenant_id, 'bench.due', seq, 'dead', 5 from event_outbox where id = $1`,
    [row!.id],
  );
  await db.sql('analyze');
}

/** A statement's text with its values as literals, for `EXPLAIN`. */
function inline(client: Client, statement: SqlStatement): string {
  return statement.text.replace(/\$(\d+)/g, (_, i: string) => {
    const v = (statement.values as unknown[])[Number(i) - 1];
    return v === null || v === undefined
      ? 'null'
      : typeof v === 'number'
        ? String(v)
        : client.escapeLiteral(String(v as string));
  });
}

/** Shared buffers (hit + read) of one call of `statement`, called twice before on `client`; in a rolled-back transaction. */
async function buffers(client: Client, statement: SqlStatement): Promise<number> {
  const text = inline(client, statement);
  await client.query('begin');
  try {
    await client.query(text);
    await client.query(text);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, buffers, costs off, timing off, summary off) ${text}`,
    );
    const top = rows.map((r) => r['QUERY PLAN']).find((line) => /Buffers:/.test(line)) ?? '';
    return [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  } finally {
    await client.query('rollback');
  }
}

async function main(): Promise<void> {
  const { db: first, serverVersion, close } = await openDecisionDatabase();
  const dbs = new Map<Layout, BenchDatabase>();
  const clients = new Map<Layout, Client>();
  try {
    heading(
      'floor-reading-ranges: the claims’ floor reading at 8 daily, 10 and 100 hourly ranges',
      serverVersion,
    );
    print(`  ${EVENTS.toLocaleString('en-US')} open events of today; one dead delivery in the oldest range`);
    const layouts = Object.keys(LAYOUTS) as Layout[];
    for (const layout of layouts) {
      const db = dbs.size === 0 ? first : await BenchDatabase.create(first.url);
      dbs.set(layout, db);
      await prepare(db, layout);
      const client = new Client({ connectionString: db.url });
      await client.connect();
      clients.set(layout, client);
    }
    // each database's open floor and xmin, as the relay holds them after a reading of every range
    const opens = new Map<Layout, { open: string; xmin: string; oldest: string }>();
    for (const layout of layouts) {
      const all = claimFloorReading(names, MARGIN_MS, null, null);
      const { rows } = await clients
        .get(layout)!
        .query<{ open: string; xmin: string }>(all.text, [...all.values]);
      const [oldest] = await dbs
        .get(layout)!
        .sql<{ lo: string }>(
          `select lo::text from outbox_partition_ranges('public.event_outbox') order by lo limit 1`,
        );
      opens.set(layout, { open: rows[0]!.open, xmin: rows[0]!.xmin, oldest: oldest!.lo });
    }
    const readings: Record<string, (layout: Layout) => SqlStatement> = {
      'sql/0035, every range (before)': () => ({
        text: `select outbox_claim_floor($1::int * interval '1 millisecond') as floor`,
        values: [MARGIN_MS],
      }),
      'sql/0041, every range (each fullScanMs)': () => claimFloorReading(names, MARGIN_MS, null, null),
      'sql/0041, from the open floor (after)': (l) =>
        claimFloorReading(names, MARGIN_MS, opens.get(l)!.open, opens.get(l)!.xmin),
      'dead counted as open (not taken)': (l) =>
        claimFloorReading(names, MARGIN_MS, opens.get(l)!.oldest, opens.get(l)!.xmin),
    };
    print('  shared buffers of one warm call (hit + read)');
    for (const [label, make] of Object.entries(readings)) {
      const counts: string[] = [];
      for (const layout of layouts)
        counts.push(`${layout}: ${await buffers(clients.get(layout)!, make(layout))}`);
      print(`    ${label.padEnd(42)} ${counts.join(', ')}`);
    }
    // the writers' part: the row a replay or a backfill's chunk writes, and its prune (nothing older than a day)
    const mark = reopenedMark(names, 'x');
    const insert = /insert into [\s\S]*?(?=\n {11}\), reopened_pruned)/.exec(mark)![0];
    const prune = /delete from [\s\S]*?(?=\n {11}\)$)/.exec(mark)![0];
    for (const [label, text] of [
      [
        'a writer’s outbox_reopened row',
        `with x as (select outbox_uuid_at(now() - interval '2 days') as event_id) ${insert}`,
      ],
      ['its prune (none older than a day)', prune],
    ] as const) {
      const counts: string[] = [];
      for (const layout of layouts)
        counts.push(`${layout}: ${await buffers(clients.get(layout)!, { text, values: [] })}`);
      print(`    ${label.padEnd(42)} ${counts.join(', ')}`);
    }
    print(`  median of ${RUNS} calls, client-side, in turns`);
    for (const [label, make] of Object.entries(readings)) {
      const times = new Map<Layout, number[]>(layouts.map((l) => [l, []]));
      for (let i = 0; i < RUNS; i++)
        for (const layout of i % 2 === 0 ? layouts : [...layouts].reverse()) {
          const statement = make(layout);
          const started = performance.now();
          await clients.get(layout)!.query(statement.text, [...statement.values]);
          if (i >= 5) times.get(layout)!.push(performance.now() - started);
        }
      const medians = layouts.map((l) => {
        const sorted = [...times.get(l)!].sort((a, b) => a - b);
        return `${l}: ${percentile(sorted, 50).toFixed(2)} ms`;
      });
      print(`    ${label.padEnd(42)} ${medians.join(', ')}`);
    }
  } finally {
    for (const client of clients.values()) await client.end();
    for (const db of dbs.values()) if (db !== first) await db.drop().catch(() => undefined);
    await close();
  }
}

exitWhenDone(main());
