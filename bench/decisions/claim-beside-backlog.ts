/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/claim-beside-backlog.ts`
 *
 * What the small tenant's lean claim does at the server beside another tenant's drain of BACKLOG (default 200,000)
 * pending events and on an idle relay (ADR 1106, addendum "the small claim at the server beside a drain"): the
 * fairness run's setup (the relay in the producer's app, EVENTS small-tenant events 5 ms apart), with the throwaway
 * database logging each statement, and the server's log (see `serverLog`; the server on this machine, the log
 * readable, in the text format) read after each run. Two modes:
 * - default: auto_explain (analyze, buffers, verbose, no timing, nested statements) on that database only: shared
 *   buffers per kind of statement (the lean claim by the events its `fresh` scan took) and one plan of the small
 *   claim and of the due-tenant scan, node by node;
 * - `MODE=statements`: `log_min_duration_statement = 0` there: parse, bind and execute times per statement (the
 *   lean claim per tenant, from its logged parameters), and how many binds of the small tenant's claim took over
 *   0.5 ms (planned anew), after a lease vacuum since that connection's previous claim or not.
 * VARIANTS: `backlog,idle` (default) or one of them; VACUUM_EVERY: `relay.vacuumLeasesEvery` for the app;
 * BENCH_RELAY_POLICY: switches of the app's relay policy.
 */
import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { createBenchApp } from '../harness/bench-app';
import { FairnessConsumer } from '../harness/bench-consumers';
import { BENCH_EVENT, type BenchDatabase } from '../harness/bench-database';
import { percentile, sleep } from '../harness/stats';
import { exitWhenDone, openDecisionDatabase, print } from './decision-server';

const BIG = '5eb0a1c4-0000-4000-8000-0000000000b1';
const SMALL = '5eb0a1c4-0000-4000-8000-0000000000c1';
const BACKLOG = Number(process.env.BACKLOG ?? 200_000);
const EVENTS = Number(process.env.EVENTS ?? 200);
/** A bind longer than this planned its statement anew (a bind on a cached plan takes 0.03–0.07 ms). */
const PLANNED_MS = 0.5;

/**
 * The server's log: PG_LOG when set, else the file its logging collector writes the text format to
 * (`pg_current_logfile('stderr')`, relative to the data directory), else the file Debian's pg_ctlcluster sends the
 * server's output to (`/var/log/postgresql/postgresql-<version>-<cluster>.log`, from `cluster_name`).
 */
async function serverLog(db: BenchDatabase): Promise<string> {
  let log = process.env.PG_LOG;
  if (!log) {
    const [row] = await db.sql<{ file: string | null; data: string; cluster: string }>(
      `select pg_current_logfile('stderr') as file, current_setting('data_directory') as data,
              current_setting('cluster_name') as cluster`,
    );
    log = row!.file
      ? isAbsolute(row!.file)
        ? row!.file
        : join(row!.data, row!.file)
      : /^\d+\/[\w-]+$/.test(row!.cluster)
        ? `/var/log/postgresql/postgresql-${row!.cluster.replace('/', '-')}.log`
        : '';
  }
  try {
    accessSync(log, constants.R_OK);
    return log;
  } catch {
    throw new Error(
      `the server's log ${log ? `(${log}) is not readable here` : 'was not found'}: set PG_LOG to its path, or turn ` +
        `the logging collector on (logging_collector = on, log_destination including stderr; a restart of the ` +
        `server) so that pg_current_logfile() names it, and run this script where that file is readable`,
    );
  }
}

/** The server log `log` from byte `offset` on. */
function logFrom(log: string, offset: number): string {
  const fd = openSync(log, 'r');
  try {
    const buffer = Buffer.alloc(statSync(log).size - offset);
    readSync(fd, buffer, 0, buffer.length, offset);
    return buffer.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** A plan node of auto_explain's JSON, the fields read here. */
interface PlanNode {
  Plans?: PlanNode[];
  'Node Type': string;
  'Subplan Name'?: string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  'Rows Removed by Filter'?: number;
}

function walk(node: PlanNode, visit: (node: PlanNode, depth: number) => void, depth = 0): void {
  visit(node, depth);
  for (const child of node.Plans ?? []) walk(child, visit, depth + 1);
}

/** A plan, a node a line, with its rows, loops and buffers. */
function planLines(plan: PlanNode): string {
  const lines: string[] = [];
  walk(plan, (p, depth) => {
    const on = p['Index Name']
      ? ` using ${p['Index Name']}`
      : p['Relation Name']
        ? ` on ${p['Relation Name']}`
        : '';
    const removed = p['Rows Removed by Filter'] ? ` removed by filter ${p['Rows Removed by Filter']}` : '';
    lines.push(
      `      ${'  '.repeat(depth)}${p['Node Type']}${p['Subplan Name'] ? ` [${p['Subplan Name']}]` : ''}${on}` +
        ` rows ${p['Actual Rows']} loops ${p['Actual Loops']} hit ${p['Shared Hit Blocks']} read ${p['Shared Read Blocks']}${removed}`,
    );
  });
  return lines.join('\n');
}

/** The small tenant's events committed beside a drain of `backlog` events (none: an idle relay); the log meanwhile. */
async function run(db: BenchDatabase, log: string, backlog: number): Promise<string> {
  await db.truncate();
  if (backlog > 0) await db.loadPendingEvents(backlog, BIG);
  await db.vacuumAnalyze();
  const offset = statSync(log).size;
  const every = process.env.VACUUM_EVERY;
  const app = await createBenchApp({
    url: db.url,
    consumers: [FairnessConsumer],
    relay: { enabled: true, ...(every ? { vacuumLeasesEvery: Number(every) } : {}) },
    applicationName: 'decision-claim-beside-backlog',
    probe: false,
    // no policy of its own: BENCH_RELAY_POLICY's switches, if any
  });
  try {
    for (let i = 0; i < EVENTS; i++) {
      await app.dataSource.transaction((manager) =>
        app.outbox.enqueue(manager, { tenantId: SMALL, eventName: BENCH_EVENT, payload: {} }),
      );
      await sleep(5);
    }
    await sleep(500);
  } finally {
    await app.close();
  }
  return logFrom(log, offset);
}

/** "p50 … p90 … max …" of `values`. */
function spread(values: number[], digits = 0): string {
  return `p50 ${percentile(values, 50)!.toFixed(digits)} p90 ${percentile(values, 90)!.toFixed(digits)} max ${Math.max(...values).toFixed(digits)}`;
}

/** auto_explain's plans of the database's statements: buffers per kind, a plan of the small claim and of the scan. */
function summarizePlans(text: string, database: string): void {
  const kinds = new Map<string, { hit: number[]; read: number[]; plan: PlanNode }>();
  for (const chunk of text.split(/\n(?=\d{4}-\d\d-\d\d )/)) {
    if (!chunk.includes(`@${database} `) || !chunk.includes('plan:')) continue;
    let explained: { 'Query Text': string; Plan: PlanNode };
    try {
      // a message's lines after its first are indented by a tab in the log
      explained = JSON.parse(chunk.slice(chunk.indexOf('{')).replace(/\n\t/g, '\n')) as typeof explained;
    } catch {
      continue;
    }
    const query = explained['Query Text'];
    let kind = query.replace(/\s+/g, ' ').trim().slice(0, 60);
    if (query.startsWith('with fresh as')) {
      let fresh = -1;
      walk(explained.Plan, (p) => {
        if (p['Subplan Name'] === 'CTE fresh') fresh = p['Actual Rows'] ?? -1;
      });
      kind = `lean claim of ${fresh > 5 ? 'more than 5' : fresh} events`;
    }
    const entry = kinds.get(kind) ?? { hit: [], read: [], plan: explained.Plan };
    entry.hit.push(explained.Plan['Shared Hit Blocks'] ?? 0);
    entry.read.push(explained.Plan['Shared Read Blocks'] ?? 0);
    kinds.set(kind, entry);
  }
  for (const [kind, { hit, read, plan }] of [...kinds]
    .sort((a, b) => b[1].hit.length - a[1].hit.length)
    .slice(0, 12)) {
    print(`    ${kind}: ${hit.length}×, shared hit ${spread(hit)}, read max ${Math.max(...read)}`);
    if (kind === 'lean claim of 1 events' || kind.includes('has_new, has_due')) print(planLines(plan));
  }
}

/** log_min_duration_statement's lines of the database: phases' times, and the small claim's binds that planned. */
function summarizeStatements(text: string, database: string): void {
  const lines = text.split('\n');
  const times = new Map<string, number[]>();
  // per backend: whether the lease table was vacuumed since its previous bind of a lean claim (before its first: yes)
  const vacuumedSince = new Map<string, boolean>();
  const binds = { afterVacuum: [0, 0], otherwise: [0, 0] };
  let vacuums = 0;
  const line =
    /^\S+ \S+ \S+ \[(\d+)\] \S+ LOG: {2}duration: ([\d.]+) ms {2}(parse|bind|execute|statement)[^:]*: (.*)$/;
  for (let i = 0; i < lines.length; i++) {
    const match = lines[i]!.includes(`@${database} `) ? line.exec(lines[i]!) : null;
    if (!match) continue;
    const [, pid, ms, phase, query] = match as unknown as [string, string, string, string, string];
    // the text goes on in lines indented by a tab, the parameters follow
    let next = i + 1;
    while (lines[next]?.startsWith('\t')) next++;
    const parameters = lines[next]?.includes('DETAIL:  parameters:') ? lines[next]! : '';
    if (/^vacuum .*outbox_event_leases/.test(query)) {
      vacuums++;
      for (const backend of vacuumedSince.keys()) vacuumedSince.set(backend, true);
    }
    let kind = query.replace(/\s+/g, ' ').slice(0, 50);
    if (query.startsWith('with fresh as')) {
      const tenant = parameters.includes(SMALL) ? 'small' : parameters.includes(BIG) ? 'backlogged' : 'no';
      kind = `lean claim, ${tenant} tenant`;
      if (phase === 'bind') {
        const after = vacuumedSince.get(pid) ?? true;
        vacuumedSince.set(pid, false);
        if (tenant === 'small') binds[after ? 'afterVacuum' : 'otherwise'][Number(ms) > PLANNED_MS ? 1 : 0]++;
      }
    }
    const key = `${phase} ${kind}`;
    times.set(key, [...(times.get(key) ?? []), Number(ms)]);
  }
  for (const [key, values] of [...times].sort((a, b) => b[1].length - a[1].length).slice(0, 16))
    print(
      `    ${key}: ${values.length}×, ${spread(values, 3)} ms, ${values.filter((v) => v > PLANNED_MS).length} over ${PLANNED_MS} ms`,
    );
  print(
    `    lease vacuums ${vacuums}; the small claim's binds after one since that connection's previous claim (or its first): ` +
      `${binds.afterVacuum[1]} of ${binds.afterVacuum[0] + binds.afterVacuum[1]} over ${PLANNED_MS} ms; ` +
      `otherwise ${binds.otherwise[1]} of ${binds.otherwise[0] + binds.otherwise[1]}`,
  );
}

async function main(): Promise<void> {
  const statements = process.env.MODE === 'statements';
  const { db, close } = await openDecisionDatabase();
  try {
    const log = await serverLog(db);
    const settings: [string, string][] = statements
      ? [
          ['log_min_duration_statement', '0'],
          ['log_parameter_max_length', '40'],
        ]
      : [
          ['session_preload_libraries', 'auto_explain'],
          ['auto_explain.log_min_duration', '0'],
          ['auto_explain.log_analyze', 'on'],
          ['auto_explain.log_buffers', 'on'],
          ['auto_explain.log_timing', 'off'],
          ['auto_explain.log_verbose', 'on'],
          ['auto_explain.log_nested_statements', 'on'],
          ['auto_explain.log_format', 'json'],
        ];
    // on the throwaway database only: its sessions, the app's, read them when they connect
    for (const [name, value] of settings) await db.sql(`alter database ${db.name} set ${name} = '${value}'`);
    for (const variant of (process.env.VARIANTS ?? 'backlog,idle').split(',')) {
      const text = await run(db, log, variant === 'idle' ? 0 : BACKLOG);
      print(
        `  ${variant === 'idle' ? 'idle relay' : `beside a drain of ${BACKLOG.toLocaleString('en-US')}`}:`,
      );
      if (statements) summarizeStatements(text, db.name);
      else summarizePlans(text, db.name);
    }
  } finally {
    await close();
  }
}

exitWhenDone(main());
