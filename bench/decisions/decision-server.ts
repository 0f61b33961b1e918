/**
 * What the scripts of `bench/decisions/` share: a server (DATABASE_URL, else an embedded PostgreSQL with the
 * settings a script asks for), a throwaway outbox database on it, and a printer for "A against B" lines. Each
 * script measures the figures of one or a few ADRs in docs/adr/ (06xx), taking turns between the variants it
 * compares, as the benchmark does: the machine's speed drifts by more than some of the differences.
 */
import { loadavg } from 'node:os';
import { Client } from 'pg';
import { resolveDatabase, type ResolvedDatabase } from '../../tools/database-url';
import { startEmbeddedPostgres } from '../../tools/embedded-postgres';
import { BenchDatabase } from '../harness/bench-database';
import type { Type } from '@nestjs/common';
import type { OutboxRelayOptions } from 'nestjs-pg-outbox';
import { createBenchApp, type BenchApp } from '../harness/bench-app';
import { consumerClass, type ConsumerVariant } from '../harness/bench-consumers';
import { median, pairedDifference } from '../harness/stats';
import { measureDrain } from '../harness/drain-cost';
import { cpuSpentMs, readBackendCpu, type RowsQuery } from '../harness/backend-cpu';
import { drive, type Transactor } from '../harness/enqueue-transactors';
import type { StatementStats } from '../harness/statement-stats';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';

/** A variant of `compareDrains`: relay options, and switches of the relay's policy over them (see `RelayPolicy`). */
export interface DrainVariant {
  relay?: OutboxRelayOptions;
  policy?: Partial<RelayPolicy>;
  /** More consumer classes for the app, beside the drained ones (they get no events). */
  consumers?: readonly Type[];
}

/** A server and a fresh database on it; `close()` drops the database and stops an embedded server. */
export interface DecisionDatabase {
  db: BenchDatabase;
  serverVersion: string;
  close: () => Promise<void>;
}

/**
 * DATABASE_URL when set (the script checks there what it needs, such as `pg_stat_statements`), else an
 * embedded PostgreSQL started with `settings`.
 */
export async function openDecisionDatabase(settings: Record<string, string> = {}): Promise<DecisionDatabase> {
  let server: ResolvedDatabase;
  if (process.env.DATABASE_URL?.trim() || Object.keys(settings).length === 0)
    server = await resolveDatabase();
  else {
    const embedded = await startEmbeddedPostgres({ settings });
    server = { url: embedded.url, embedded, stop: () => embedded.stop() };
  }
  const db = await BenchDatabase.create(server.url);
  const [row] = await db.sql<{ version: string }>(`select current_setting('server_version') as version`);
  return {
    db,
    serverVersion: row!.version,
    close: async () => {
      await db.drop();
      await server.stop();
    },
  };
}

/** Two connections to `url`: one for the statements measured, one to hold a snapshot beside them. */
export async function connectTwo(url: string): Promise<[Client, Client]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  const holder = new Client({ connectionString: url });
  await holder.connect();
  return [client, holder];
}

/** Prints the script's heading: what it measures, where, when, and that the machine may be shared. */
export function heading(title: string, serverVersion: string): void {
  print(`${title}`);
  print(
    `  ${new Date().toISOString()} · PostgreSQL ${serverVersion} · ${process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded'} · ` +
      `Node ${process.version} · load average ${loadAverage()}`,
  );
}

/** One figure per variant, with each variant's runs and its ratio to the first variant's median. */
export function compare(label: string, unit: string, runs: ReadonlyMap<string, readonly number[]>): void {
  const [first] = runs.values();
  const base = median(first ?? []);
  print(`  ${label}`);
  for (const [variant, values] of runs) {
    const m = median(values);
    const all = values.map((v) => format(v)).join(' / ');
    print(
      `    ${variant.padEnd(34)} ${format(m).padStart(10)} ${unit}  (runs: ${all}; ${(m / base).toFixed(2)}×)`,
    );
  }
}

/**
 * Each variant after the first against the first, taken in pairs (see `pairedDifference`): the median of the
 * turns' differences and its interquartile range. `runs`: one figure per variant and turn, in turn order.
 */
export function comparePaired(
  label: string,
  unit: string,
  runs: ReadonlyMap<string, readonly number[]>,
): void {
  const [[baseVariant, base] = ['', []], ...others] = runs;
  print(`  ${label}, against ${baseVariant} (${unit}, median of the turns' differences [IQR])`);
  for (const [variant, values] of others) {
    const d = pairedDifference(values, base);
    print(
      `    ${variant.padEnd(40)} ${format(d.median).padStart(8)}  [${format(d.q1)} to ${format(d.q3)}], ${d.pairs} pairs`,
    );
  }
}

/** Runs `measure` for each variant, `turns` times, forward then backward (see `inTurn`), collecting its figures. */
export async function inTurns<V extends string, F extends string>(
  variants: readonly V[],
  turns: number,
  measure: (variant: V) => Promise<Record<F, number>>,
): Promise<Map<F, Map<V, number[]>>> {
  const figures = new Map<F, Map<V, number[]>>();
  for (let turn = 0; turn < turns; turn++) {
    const order = turn % 2 === 0 ? variants : [...variants].reverse();
    for (const variant of order) {
      const result = await measure(variant);
      for (const [figure, value] of Object.entries(result) as [F, number][]) {
        if (!figures.has(figure)) figures.set(figure, new Map(variants.map((v) => [v, []])));
        figures.get(figure)!.get(variant)!.push(value);
      }
    }
  }
  return figures;
}

/** Each variant's slices as `groups` means of consecutive slices (`compare` then takes the median of those). */
export function inGroups<V>(slices: ReadonlyMap<V, readonly number[]>, groups = 4): Map<V, number[]> {
  const grouped = new Map<V, number[]>();
  for (const [variant, values] of slices) {
    const size = Math.ceil(values.length / groups);
    const means: number[] = [];
    for (let i = 0; i < values.length; i += size) {
      const group = values.slice(i, i + size);
      means.push(group.reduce((sum, v) => sum + v, 0) / group.length);
    }
    grouped.set(variant, means);
  }
  return grouped;
}

export function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

function format(value: number): string {
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(Math.abs(value) >= 10 ? 1 : 3);
}

function loadAverage(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}

/**
 * `drain()` of `events` pending events of one tenant, two consumers of each of `kinds` (default: both no-op, then
 * one writing a row through `context.manager`) — with each variant's relay options and policy switches, in turns (see `inTurns`), `turns`
 * times: events per second, and CPU per event of the Node process (user + system) and of the app's PostgreSQL
 * backends (from /proc, when the server runs on this machine), printed per consumer kind.
 */
export async function compareDrains<V extends string>(
  name: string,
  variants: Readonly<Record<V, DrainVariant>>,
  {
    events,
    turns,
    kinds = ['no-db', 'db-write'],
  }: { events: number; turns: number; kinds?: readonly ConsumerVariant[] },
): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const applicationName = `decision-${name}`;
  try {
    heading(
      `drain() of ${events.toLocaleString('en-US')} events × 2 consumers per variant, ${turns} turns`,
      serverVersion,
    );
    for (const consumers of kinds) {
      const figures = await inTurns<V, DrainFigure>(Object.keys(variants) as V[], turns, async (variant) => {
        await db.resetWithPendingEvents(events);
        const app = await createBenchApp({
          url: db.url,
          consumers: [consumerClass(consumers), ...(variants[variant].consumers ?? [])],
          relay: { enabled: false, ...variants[variant].relay },
          policy: variants[variant].policy ?? {},
          applicationName,
          probe: false,
        });
        try {
          return await drainFigures(app, db, applicationName, events);
        } finally {
          await app.close();
        }
      });
      const label = DRAIN_LABELS[consumers];
      for (const [figure, runs] of figures) compare(label, figure, runs);
    }
  } finally {
    await close();
  }
}

/** A figure of a drain, as `compare` prints it. */
export type DrainFigure = 'events/s' | 'Node µs CPU/event' | 'PostgreSQL µs CPU/event';

/** `measureDrain` of `app` (the backends named `applicationName`): its rate and CPU per event, by figure. */
export async function drainFigures(
  app: BenchApp,
  db: BenchDatabase,
  applicationName: string,
  events: number,
): Promise<Record<DrainFigure, number>> {
  const drained = await measureDrain(app, db, applicationName, events);
  return {
    'events/s': drained.eventsPerSecond,
    'Node µs CPU/event': drained.nodeUs,
    'PostgreSQL µs CPU/event': drained.serverUs,
  };
}

const DRAIN_LABELS: Record<ConsumerVariant, string> = {
  'no-db': 'two no-op consumers',
  'db-write': 'one of two consumers writes a row',
  'db-write-all': 'each of two consumers writes a row',
};

/** Ends a script once `work` is done: exit 0, or 1 after printing its error. */
export function exitWhenDone(work: Promise<void>): void {
  work.then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}

/** What one slice of enqueue transactions did, per commit (see {@link enqueueSlice}). */
export type EnqueueFigures = Record<
  'rate' | 'total' | 'node' | 'server' | 'statements' | 'loopTurns' | 'loopEvents',
  number
>;

/**
 * Runs `transactor`'s transactions for `ms` on `connections` connections named `name`: commits/s, and per commit the
 * CPU of this process (Node), of the backends named `name` (server), both, and the statements `stats` counted.
 */
export async function enqueueSlice(
  transactor: Transactor,
  connections: number,
  ms: number,
  name: string,
  query: RowsQuery,
  stats: StatementStats,
): Promise<EnqueueFigures> {
  const cpuBefore = await readBackendCpu(query, [name]);
  await stats.reset();
  const slice = await drive(transactor, connections, ms);
  // the wake-ups of the slice's last commits: sent within a gap or two
  await new Promise((resolve) => setTimeout(resolve, 25));
  const reading = await stats.read(0);
  const serverMs = cpuSpentMs(cpuBefore, await readBackendCpu(query, [name])) ?? Number.NaN;
  const node = slice.cpuUs / slice.commits;
  const server = (serverMs * 1000) / slice.commits;
  return {
    rate: (slice.commits * 1000) / slice.ms,
    total: node + server,
    node,
    server,
    statements: (reading?.calls ?? Number.NaN) / slice.commits,
    loopTurns: slice.loopTurns / slice.commits,
    loopEvents: slice.loopEvents / slice.commits,
  };
}

/** Prints the lines of {@link enqueueSlice}'s figures, taken in turns, `label` first on each. */
export function compareEnqueue(
  label: string,
  figures: ReadonlyMap<string, ReadonlyMap<string, readonly number[]>>,
): void {
  compare(`${label}commits/s`, '/s', inGroups(figures.get('rate')!));
  compare(`${label}CPU per commit, Node + server`, 'µs', inGroups(figures.get('total')!));
  compare(`${label}Node CPU per commit`, 'µs', inGroups(figures.get('node')!));
  compare(`${label}server CPU per commit`, 'µs', inGroups(figures.get('server')!));
  compare(`${label}statements per commit`, '', inGroups(figures.get('statements')!));
}

/**
 * A statement's shared buffers and execution time, from its plan (`whole`: the plan), run in a transaction rolled
 * back: what it writes (a claim's leases, a purge's deletes) is undone, so each run measures the same work.
 */
export async function explainRolledBack(
  client: Client,
  statement: { text: string; values: readonly unknown[] },
  whole = false,
): Promise<string> {
  await client.query('begin');
  try {
    const { rows } = await client.query<Record<string, string>>(
      `explain (analyze, buffers) ${statement.text}`,
      [...statement.values],
    );
    const lines = rows.map((row) => Object.values(row)[0]!);
    if (whole) return lines.join('\n');
    const buffers = /Buffers: (shared [^\n]*)/.exec(lines.find((l) => /Buffers: shared/.test(l)) ?? '')?.[1];
    const time = lines.find((l) => /Execution Time/.test(l))?.trim();
    return `${buffers ?? 'no buffers'}, ${time ?? ''}`;
  } finally {
    await client.query('rollback');
  }
}

/**
 * Inserts `count` events of `tenantId` named `eventName` with `status`, their ids UUIDv7 of the moment (so they fall
 * in today's range of a partitioned layout), and one delivery each of the consumer `consumer`, pending.
 */
export async function insertEventsNow(
  db: BenchDatabase,
  rows: { tenantId: string; eventName: string; status: string; count: number; consumer: string },
): Promise<void> {
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status)
     select (lpad(to_hex(floor(extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || '7' ||
             substr(md5(g::text), 1, 3) || '8' || substr(md5(g::text), 4, 15))::uuid,
            $1::uuid, $2, '{}', $3 from generate_series(1, $4::int) g`,
    [rows.tenantId, rows.eventName, rows.status, rows.count],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
     select id, tenant_id, $1, seq, 'pending' from event_outbox`,
    [rows.consumer],
  );
}
