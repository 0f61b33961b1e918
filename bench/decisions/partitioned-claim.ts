/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/partitioned-claim.ts`
 *
 * What the partitioned layout (ADR 1207) costs the claims, and whether that cost grows with the ranges kept. Four
 * databases side by side on one server: today's layout; partitioned by days with 8 ranges (4 days back, 3 ahead);
 * partitioned by hours with 10 ranges (6 hours back, 3 ahead) and with 100 (96 hours back, 3 ahead). Each holds EVENTS (default 20,000) pending events of
 * one tenant made now (UUIDv7 ids: today's range), two live consumers, and as many due deliveries of a third. Each
 * statement as the relay sends it, as a named statement (generic plan after five runs), in turns, RUNS (default 300)
 * times each, each run in a transaction rolled back: the fan-out (100 events), the lean claim (100 events), the due
 * claim (100 deliveries) — each without a floor, then with the floor the relay reads on its database (ADR 1207's
 * addendum: the ranges below it are pruned) —, the floor's reading and the due-tenant scan (each also in its form
 * before it stopped planning every range, sql/0034 and sql/0033; the scan also from the floor, sql/0039), one
 * retention batch (nothing to purge) and the partition drop step (nothing to drop). `ONLY` (a pattern) keeps the
 * statements whose label matches it.
 * Each statement is sent as the relay sends it: named on its generic plan when it has a prepared form, else unnamed
 * (the due claim both ways). Median and p90 in µs, client-side (one connection per database, loopback); then how
 * many partitions each claim's plan runs and the shared buffers its execution touched (`EXPLAIN (ANALYZE,
 * BUFFERS)`, deterministic where the times are not); and each reading's one call, `EXPLAIN (ANALYZE, BUFFERS,
 * SUMMARY)`, whose buffers count the catalog its statements' planning reads.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import {
  claimDueDeliveries,
  claimFloorReading,
  claimNewEvents,
  dueTenants,
  fanOutPendingEvents,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import { dropPartitionStep, purgeSettledBatch } from '../../libs/outbox/src/store/sql/retention';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import { BenchDatabase } from '../harness/bench-database';
import { percentile } from '../harness/stats';
import { exitWhenDone, heading, openDecisionDatabase, print, insertEventsNow } from './decision-server';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const RUNS = Number(process.env.RUNS ?? 300);
/** A pattern: only the statements whose label matches it (e.g. `ONLY='due-tenant scan'`). */
const ONLY = process.env.ONLY;
const TENANT = '7d3f0a52-61c2-4d0e-9b1a-2f4c5e6d7a8b';
const NIL = '00000000-0000-0000-0000-000000000000';
const names = outboxNames();
/** The due-tenant scan's positions: none, every tenant from its start (the relay's first scan). */
const POSITIONS = { tenants: [], seqs: [], server: '0', leasesSince: null };
/** The relay's margin of the claims' floor (RelayPolicy.claimFloor). */
const FLOOR_MARGIN_MS = 600_000;

const LAYOUTS = {
  'today’s tables': null,
  'days, 8 ranges': { width: '1 day', back: 4 * 86_400_000 },
  'hours, 10 ranges': { width: '1 hour', back: 6 * 3_600_000 },
  'hours, 100 ranges': { width: '1 hour', back: 96 * 3_600_000 },
} as const;
type Layout = keyof typeof LAYOUTS;
/** The migrations whose form of a reading the script runs beside today's, and that reading's function. */
const PREVIOUS_READINGS = {
  '0034-outbox-claim-floor-claimable': 'outbox_claim_floor',
  '0033-outbox-due-tenants-probes': 'outbox_due_tenants',
} as const;

/** The floor's reading of sql/0035 (its one-argument form), whose text `previous` renames. */
const ONE_ARGUMENT_READING: SqlStatement = {
  text: `select outbox_claim_floor($1::int * interval '1 millisecond') as floor`,
  values: [FLOOR_MARGIN_MS],
};

/** `statement` calling the form of `file` (PREVIOUS_READINGS) of its reading instead of today's. */
function previous(statement: SqlStatement, file: keyof typeof PREVIOUS_READINGS): SqlStatement {
  const fn = PREVIOUS_READINGS[file];
  return { ...statement, text: statement.text.replace(`${fn}(`, `${fn}_${file.slice(0, 4)}(`) };
}

async function prepare(db: BenchDatabase, layout: Layout): Promise<void> {
  const partitioned = LAYOUTS[layout];
  if (partitioned !== null) {
    const start = new Date(Date.now() - partitioned.back);
    start.setUTCMinutes(0, 0, 0);
    const statements = partitionedLayoutSql('public', {
      width: partitioned.width,
      ahead: 3,
      start: start.toISOString(),
    })
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.startsWith('--'));
    for (const statement of statements) await db.sql(statement);
  }
  // the readings' forms before they stopped planning every range (ADR 1207, addendum "Readings that do not plan
  // every range"), beside the current ones under other names
  for (const [file, fn] of Object.entries(PREVIOUS_READINGS))
    await db.sql(
      readFileSync(join(__dirname, '../../libs/outbox/sql', `${file}.up.sql`), 'utf8')
        .replace(/^--.*$/gm, '')
        .replace(new RegExp(`public\\.${fn}\\(`, 'g'), `public.${fn}_${file.slice(0, 4)}(`)
        .replace(/^(revoke|grant) .*$/gm, ''),
    );
  await db.sql(
    `insert into outbox_consumers (name, event_patterns) values ('bench.a', '{bench.part.v1}'), ('bench.b', '{bench.part.v1}')`,
  );
  await insertEventsNow(db, {
    tenantId: TENANT,
    eventName: 'bench.part.v1',
    status: 'pending',
    count: EVENTS,
    consumer: 'bench.due',
  });
  await db.sql('analyze');
}

/**
 * The statement as it was before the floor (ADR 1207's addendum): its bounds on the id taken out, the parameter
 * still named once (a one-time check that it is not null), so that today's tables show what the bound costs them.
 */
function unbounded(statement: SqlStatement): SqlStatement {
  let first = true;
  const text = statement.text.replace(/\s+and \w+\.(?:event_)?id >= (\$\d+)::uuid/g, (_, param: string) => {
    if (!first) return '';
    first = false;
    return ` and ${param}::uuid is not null`;
  });
  return { ...statement, text };
}

/**
 * One run as the relay sends it: a statement with a prepared form (`prepared`) named, on its generic plan (the
 * relay switches its transaction to generic plans before it: ADR 0502), any other unnamed, planned with its values.
 */
async function timeOnce(client: Client, name: string, statement: SqlStatement): Promise<number> {
  await client.query('begin');
  const named = statement.prepared !== undefined;
  if (named) await client.query(`set local plan_cache_mode = force_generic_plan`);
  const started = performance.now();
  await client.query(
    named
      ? { name, text: statement.text, values: statement.values as unknown[] }
      : { text: statement.text, values: statement.values as unknown[] },
  );
  const elapsed = performance.now() - started;
  await client.query('rollback');
  return elapsed * 1000;
}

/** A statement's value as an SQL literal, for `EXPLAIN` of its text. */
function literal(client: Client, v: unknown): string {
  return v === null || v === undefined
    ? 'null'
    : Array.isArray(v)
      ? client.escapeLiteral(`{${(v as unknown[]).map((x) => JSON.stringify(x)).join(',')}}`)
      : typeof v === 'number'
        ? String(v)
        : client.escapeLiteral(typeof v === 'string' ? v : JSON.stringify(v));
}

/**
 * How many distinct partitions (or tables) of the three histories the statement's plan runs, and how many shared
 * buffers its execution touches: on its generic plan when the relay names it, else planned with its values.
 */
async function partitionsInPlan(client: Client, name: string, statement: SqlStatement): Promise<string> {
  await client.query('begin');
  const mode = statement.prepared !== undefined ? 'force_generic_plan' : 'force_custom_plan';
  await client.query(`set local plan_cache_mode = ${mode}`);
  await client.query({ text: `prepare plan_probe_${name} as ${statement.text}` });
  const args = (statement.values as unknown[]).map((v) => literal(client, v)).join(', ');
  const rows = await client.query<{ 'QUERY PLAN': string }>(
    `explain (analyze, buffers, costs off, timing off, summary off) execute plan_probe_${name}(${args})`,
  );
  await client.query('rollback');
  const top = rows.rows.map((r) => r['QUERY PLAN']).find((line) => /^\s*Buffers:/.test(line)) ?? '';
  const buffers = [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  const scanned = new Set<string>();
  for (const row of rows.rows) {
    const line = row['QUERY PLAN'];
    // scans that ran (a ModifyTable lists every partition of its table, pruned or not, without figures)
    if (!/\(actual rows/.test(line)) continue;
    const m = /on ((event_outbox|outbox_deliveries|consumer_inbox)\w*)/.exec(line);
    if (m) scanned.add(m[1]!);
  }
  return `${scanned.size} partitions, ${buffers} buffers`;
}

/**
 * One call of a reading (a function), `EXPLAIN (ANALYZE, BUFFERS, SUMMARY)`: the execution time and the shared
 * buffers of the call, which count what the function's statements do inside it, their planning included (the
 * buffers of the catalog that planning reads are the deterministic part).
 */
async function readingCost(client: Client, statement: SqlStatement): Promise<string> {
  const values = (statement.values as unknown[]).map((v) => literal(client, v));
  const text = statement.text.replace(/\$(\d+)/g, (_, i: string) => values[Number(i) - 1]!);
  const rows = await client.query<{ 'QUERY PLAN': string }>(
    `explain (analyze, buffers, summary, costs off, timing off) ${text}`,
  );
  const lines = rows.rows.map((r) => r['QUERY PLAN']);
  const top = lines.find((line) => /^\s*Buffers:/.test(line)) ?? '';
  const buffers = [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  const ms = /Execution Time: ([\d.]+) ms/.exec(lines.join('\n'))?.[1] ?? '?';
  return `${Number(ms).toFixed(2)} ms, ${buffers} buffers`;
}

async function main(): Promise<void> {
  const { db: first, serverVersion, close } = await openDecisionDatabase();
  const dbs = new Map<Layout, BenchDatabase>();
  const clients = new Map<Layout, Client>();
  try {
    heading(
      'partitioned-claim: the claims and the readings on today’s tables, 8 daily, 10 and 100 hourly ranges',
      serverVersion,
    );
    const layouts = Object.keys(LAYOUTS) as Layout[];
    for (const layout of layouts) {
      const db = dbs.size === 0 ? first : await BenchDatabase.create(first.url);
      dbs.set(layout, db);
      await prepare(db, layout);
      const client = new Client({ connectionString: db.url });
      await client.connect();
      clients.set(layout, client);
    }
    print(
      `  ${EVENTS.toLocaleString('en-US')} pending events and due deliveries of one tenant; ${RUNS} runs each`,
    );
    // each database's floor as the relay reads it (ClaimFloor: the nil id on today's layout, which has none)
    const floors = new Map<Layout, string>();
    for (const layout of layouts) {
      const statement = claimFloorReading(names, FLOOR_MARGIN_MS, null, null);
      const { rows } = await clients
        .get(layout)!
        .query<{ floor: string | null }>(statement.text, [...statement.values]);
      floors.set(layout, rows[0]!.floor ?? NIL);
    }
    print(`  floors: ${layouts.map((l) => `${l}: ${floors.get(l)}`).join(', ')}`);
    const claim = { tenantId: TENANT, liveWithinMs: 60_000, limit: 100, leaseToken: NIL, leaseMs: 30_000 };
    const claims: Record<string, (floor: string) => SqlStatement> = {
      'fan-out (100 events)': (floor) =>
        fanOutPendingEvents(names, {
          ...claim,
          inProcess: ['bench.a'],
          hosted: ['bench.a', 'bench.b'],
          tenantConsumers: [],
          floor,
        }),
      'lean claim (100 events)': (floor) =>
        claimNewEvents(names, { ...claim, inProcess: ['bench.a', 'bench.b'], floor }),
      'due claim (100 deliveries)': (floor) =>
        claimDueDeliveries(names, {
          tenantId: TENANT,
          consumers: ['bench.due'],
          limit: 100,
          leaseToken: NIL,
          leaseMs: 30_000,
          floor,
        }),
    };
    // each claim without a floor (a full scan, and the claims before the floor existed), then with its database's
    const statements: Record<string, (layout: Layout) => SqlStatement> = {};
    for (const [label, make] of Object.entries(claims))
      statements[`${label}, text before the floor`] = () => unbounded(make(NIL));
    for (const [label, make] of Object.entries(claims)) statements[label] = () => make(NIL);
    for (const [label, make] of Object.entries(claims))
      statements[`${label}, floored`] = (layout) => make(floors.get(layout)!);
    // the due claim as it was sent before it was named (planned with its values at each claim)
    statements['due claim (100 deliveries), floored, unnamed'] = (layout) => ({
      ...claims['due claim (100 deliveries)']!(floors.get(layout)!),
      prepared: undefined,
    });
    // every range (the three-argument form without an open floor: what the relay reads every fullScanMs); its
    // reading from the open floor: bench/decisions/floor-reading-ranges.ts
    statements['floor reading'] = () => claimFloorReading(names, FLOOR_MARGIN_MS, null, null);
    statements['floor reading, sql/0034'] = () =>
      previous(ONE_ARGUMENT_READING, '0034-outbox-claim-floor-claimable');
    statements['due-tenant scan'] = () => dueTenants(names, 100, null, POSITIONS);
    // from the floor the relay reads (the seven-argument form; on today's layout there is none: the same statement)
    statements['due-tenant scan, floored'] = (layout) =>
      dueTenants(names, 100, null, POSITIONS, floors.get(layout)!);
    statements['due-tenant scan, sql/0033'] = () =>
      previous(dueTenants(names, 100, null, POSITIONS), '0033-outbox-due-tenants-probes');
    statements['retention batch (none due)'] = () =>
      purgeSettledBatch(names, 7, 1000, { ranges: [], ats: [] });
    statements['partition drop step (none)'] = () => dropPartitionStep(names, 7);
    const only = ONLY === undefined ? null : new RegExp(ONLY);
    for (const [label, statement] of Object.entries(statements)) {
      if (only !== null && !only.test(label)) continue;
      const times = new Map<Layout, number[]>(layouts.map((l) => [l, []]));
      const named = label.replace(/\W+/g, '_');
      for (let i = 0; i < RUNS; i++)
        for (const layout of i % 2 === 0 ? layouts : [...layouts].reverse()) {
          const elapsed = await timeOnce(clients.get(layout)!, named, statement(layout));
          if (i >= 10) times.get(layout)!.push(elapsed);
        }
      print(`  ${label}`);
      const base = percentile(
        [...times.get(layouts[0]!)!].sort((a, b) => a - b),
        50,
      );
      for (const [layout, runs] of times) {
        const sorted = [...runs].sort((a, b) => a - b);
        const m = percentile(sorted, 50);
        print(
          `    ${layout.padEnd(20)} median ${m.toFixed(0).padStart(6)} µs, p90 ${percentile(sorted, 90).toFixed(0).padStart(6)} µs (${(m / base).toFixed(2)}×)`,
        );
      }
    }
    print(
      '  partitions (or tables) of the histories that the plan runs, and shared buffers touched (hit + read)',
    );
    for (const [label, statement] of Object.entries(statements).slice(0, 10)) {
      if (only !== null && !only.test(label)) continue;
      const counts: string[] = [];
      for (const layout of layouts)
        counts.push(
          `${layout}: ${await partitionsInPlan(clients.get(layout)!, label.replace(/\W+/g, '_'), statement(layout))}`,
        );
      print(`    ${label.padEnd(48)} ${counts.join(', ')}`);
    }
    print(
      '  readings, one call: its execution (the statements it runs inside, planning included) and shared buffers,',
    );
    print('  on a session that called it before, then the first call of a new session');
    for (const label of Object.keys(statements).filter(
      (l) => /^(floor reading|due-tenant scan)/.test(l) && (only === null || only.test(l)),
    )) {
      const costs: string[] = [];
      for (const layout of layouts) {
        // called just before: its plans made since the last invalidation (autovacuum visits the partitions)
        const statement = statements[label]!(layout);
        await clients.get(layout)!.query(statement.text, [...statement.values]);
        const warm = await readingCost(clients.get(layout)!, statement);
        const fresh = new Client({ connectionString: dbs.get(layout)!.url });
        await fresh.connect();
        const cold = await readingCost(fresh, statements[label]!(layout)).finally(() => fresh.end());
        costs.push(`${layout}: ${warm} (first ${cold})`);
      }
      print(`    ${label.padEnd(28)} ${costs.join(', ')}`);
    }
  } finally {
    for (const client of clients.values()) await client.end();
    for (const db of dbs.values()) if (db !== first) await db.drop().catch(() => undefined);
    await close();
  }
}

exitWhenDone(main());
