import { join } from 'node:path';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { outboxMigrations } from 'nestjs-pg-outbox';
import { buildApp } from '../../support/build-app';
import { startChildRelay, type ChildRelay } from '../../support/child-relay';
import type { TestDatabase } from '../../support/test-database';
import { waitFor } from '../../support/wait-for';
import { FAULT_EFFECTS_SQL } from './fault-consumers';
import { pace } from './fault-fleet';
import { FAILOVER_EVENT, PROBE_TENANT } from './failover-env';
import { checkHistory, timeToQuiet, type HistoryReport } from './history';
import { ReplicatedPostgres, type PostgresNode } from './replicated-postgres';
import { TcpProxy } from './tcp-proxy';

/** One case of the failover scenario. */
export interface FailoverCase {
  name: string;
  /** How the old primary goes: crashed (`pg_ctl stop -m immediate`) or hung (every process SIGSTOPped). */
  fault: 'kill' | 'freeze';
  synchronous: boolean;
  /** How late the standby receives the primary's WAL (asynchronous replication only). */
  replicationDelayMs?: number;
  /**
   * How the app reaches the new primary: a loopback proxy re-pointed at it after the promotion (as a DNS name or
   * a virtual IP looks; connections already open stay with the old primary), or a pg `Client` class that picks
   * the writable one of both hosts.
   */
  route: 'proxy' | 'client-class';
}

/** What a case measured: the history check's findings and the figures the docs quote. */
export interface FailoverFigures {
  calls: number;
  committed: number;
  refused: number;
  /** Callers with neither a commit nor an error within {@link ANSWER_BOUND_MS} of the last call. */
  unanswered: number;
  /** The longest a caller waited for its commit or its error. */
  maxAnswerMs: number;
  /** Rows and events whose partner is missing (either way). */
  unpaired: number;
  /** Commits the callers were told of that are not on the new primary. */
  lostAcknowledged: number;
  /** Of those, the ones missing only in part (the row, the event or the effect still there). */
  lostInPart: number;
  /** Transactions whose caller got an error but which committed (the connection died during COMMIT). */
  inDoubtCommitted: number;
  history: HistoryReport;
  dead: number;
  /** From the promotion to the first event the worker handled after it; null when none was. */
  resumeMs: number | null;
  /** From the commit of a probe event on the new primary to its effect; null when not within {@link PROBE_BOUND_MS}. */
  probeMs: number | null;
  /** From the promotion to the first commit of an API call begun after it. */
  apiResumeMs: number | null;
  /** Whether a session LISTENs on the new primary once the probe was delivered. */
  listenOnNewPrimary: boolean;
  /** Commit → handler p99 of the API's commits from 2 s after the promotion on; null without any. */
  p99Ms: number | null;
  p99Samples: number;
  /** The worker's first few distinct warnings and errors (what the library said about the outage). */
  workerLog: string[];
}

/** How long the scenario waits for every caller's answer (the API's query_timeout is 3 s). */
export const ANSWER_BOUND_MS = 10_000;
/**
 * How long an event enqueued after the promotion (in a tenant of its own, so not behind the outage's backlog) may
 * take to be delivered: after a freeze, the relay first gives up on the old primary (its round-trip deadline is
 * the 3 s lease + 1 s).
 */
export const PROBE_BOUND_MS = 10_000;
/** How long the API goes on enqueueing after the promotion. */
const LOAD_AFTER_PROMOTION_MS = 5_000;
const API_SCRIPT = join(__dirname, 'failover-api-child.ts');
const WORKER_SCRIPT = join(__dirname, 'failover-worker-child.ts');

/**
 * Runs one case: a primary and a streaming standby, an API process enqueueing ~100 business transactions a
 * second and a worker relaying them; the primary is killed or frozen, the standby promoted 0.5 s later, the load
 * goes on for {@link LOAD_AFTER_PROMOTION_MS}, then the history is checked on the new primary.
 */
export async function runFailover(c: FailoverCase): Promise<FailoverFigures> {
  const pair = await ReplicatedPostgres.start({
    synchronous: c.synchronous,
    replicationDelayMs: c.replicationDelayMs,
  });
  const children: ChildRelay[] = [];
  let proxy: TcpProxy | null = null;
  let db: TestDatabase | undefined;
  try {
    await createSchema(pair.primary);
    proxy = c.route === 'proxy' ? await TcpProxy.start(pair.primary.port) : null;
    const env: Record<string, string> = proxy
      ? { DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/postgres` }
      : { DATABASE_URL: pair.primary.url, DATABASE_HOSTS: `${pair.primary.port},${pair.standby.port}` };
    const [api, worker] = await Promise.all([
      startChildRelay(env, { script: API_SCRIPT, waitReady: false }),
      startChildRelay(env, { script: WORKER_SCRIPT, waitReady: false }),
    ]);
    children.push(api, worker);
    await Promise.all([api.line('READY', 60_000), worker.line('READY', 60_000)]);
    await waitFor(() => count(api, 'COMMIT ') >= 200 && count(worker, 'HANDLED ') >= 100, {
      timeoutMs: 20_000,
      message: 'the load under way (200 commits, 100 handled)',
    });

    if (c.fault === 'kill') await pair.kill(pair.primary);
    else await pair.freeze(pair.primary);
    await pace(500); // calls in flight meet the dead or hung primary
    await pair.promote(pair.standby);
    const promotedAt = Date.now();
    proxy?.pointAt(pair.standby.port);
    const newPrimary = await databaseAt(pair.standby);
    db = newPrimary;

    const probe = await enqueueProbe(pair.standby.url);
    const probeMs = await deliveredWithin(newPrimary, probe.eventId, PROBE_BOUND_MS).then((at) =>
      at === null ? null : at - probe.committedAt,
    );
    const listenOnNewPrimary = await waitFor(() => listenSessions(newPrimary), { timeoutMs: 3_000 }).then(
      () => true,
      () => false,
    );
    await pace(Math.max(0, promotedAt + LOAD_AFTER_PROMOTION_MS - Date.now()));
    api.signal('SIGUSR2');
    await api.line('STOPPED');
    const calls = parseCalls(api.lines);
    await waitFor(() => [...calls().values()].every((call) => call.answeredAt !== undefined), {
      timeoutMs: ANSWER_BOUND_MS,
    }).catch(() => undefined);
    await timeToQuiet(newPrimary, 30_000).catch(() => undefined);
    return await measure(newPrimary, calls(), worker.lines, { promotedAt, probeMs, listenOnNewPrimary }, c);
  } finally {
    await Promise.all(children.map((child) => child.kill('SIGKILL')));
    await db?.drop();
    await proxy?.close();
    await pair.stop();
  }
}

/** Prints a case's figures on one line, for the docs. */
export function printFigures(c: FailoverCase, f: FailoverFigures): void {
  console.log(
    `[faults] failover, ${c.name}: calls=${f.calls} committed=${f.committed} refused=${f.refused} ` +
      `unanswered=${f.unanswered} max-answer=${f.maxAnswerMs}ms lost-acknowledged=${f.lostAcknowledged} ` +
      `(in part: ${f.lostInPart}) in-doubt-committed=${f.inDoubtCommitted} unpaired=${f.unpaired} ` +
      `duplicated=${f.history.duplicated} dead=${f.dead} resume=${f.resumeMs ?? 'none'}ms ` +
      `probe=${f.probeMs ?? 'none'}ms ` +
      `api-resume=${f.apiResumeMs ?? 'none'}ms listen-on-new-primary=${f.listenOnNewPrimary} ` +
      `p99=${f.p99Ms ?? 'none'}ms (${f.p99Samples} commits)\n  worker said: ${f.workerLog.join('\n    ')}`,
  );
}

interface Call {
  beganAt: number;
  answeredAt?: number;
  committed?: boolean;
}

async function createSchema(primary: PostgresNode): Promise<void> {
  const migrator = new DataSource({ type: 'postgres', url: primary.url, migrations: outboxMigrations });
  await migrator.initialize();
  try {
    await migrator.runMigrations();
    await migrator.query(FAULT_EFFECTS_SQL);
    await migrator.query('create table failover_orders (key text primary key)');
  } finally {
    await migrator.destroy();
  }
}

/** The new primary, through one connection of this process (closed by `drop`). */
async function databaseAt(node: PostgresNode): Promise<TestDatabase> {
  const client = new Client({ connectionString: node.url });
  await client.connect();
  return {
    url: node.url,
    name: 'postgres',
    sql: async <T>(text: string, values?: unknown[]) => (await client.query(text, values)).rows as T[],
    drop: () => client.end(),
  };
}

/** Enqueues one event (with its row) on the new primary, from this process, in the probe's tenant. */
async function enqueueProbe(url: string): Promise<{ eventId: string; committedAt: number }> {
  const app = await buildApp({ url, outbox: { relay: { enabled: false } } });
  try {
    const eventId = await app.dataSource.transaction(async (manager) => {
      await manager.query(`insert into failover_orders (key) values ('probe')`);
      return app.outbox.enqueue(manager, {
        tenantId: PROBE_TENANT,
        eventName: FAILOVER_EVENT,
        payload: { key: 'probe' },
      });
    });
    return { eventId, committedAt: Date.now() };
  } finally {
    await app.close();
  }
}

/** When the event's effect was first seen, or null if not within `timeoutMs`. */
async function deliveredWithin(db: TestDatabase, eventId: string, timeoutMs: number): Promise<number | null> {
  return waitFor(
    async () => {
      const [row] = await db.sql<{ n: number }>(
        'select count(*)::int n from fault_effects where event_id = $1',
        [eventId],
      );
      return row!.n > 0 ? Date.now() : 0;
    },
    { timeoutMs, intervalMs: 20 },
  ).catch(() => null);
}

async function listenSessions(db: TestDatabase): Promise<number> {
  const [row] = await db.sql<{ n: number }>(
    `select count(*)::int n from pg_stat_activity where backend_type = 'client backend' and query ilike 'listen %'`,
  );
  return row!.n;
}

function count(child: ChildRelay, prefix: string): number {
  return child.lines.filter((line) => line.startsWith(prefix)).length;
}

/** The API's calls by key, from its BEGIN / COMMIT / ERROR lines (read again at each call). */
function parseCalls(lines: readonly string[]): () => Map<string, Call> {
  return () => {
    const calls = new Map<string, Call>();
    for (const line of lines) {
      const [kind, key, at] = line.split(' ');
      if (kind === 'BEGIN') calls.set(key!, { beganAt: Number(at) });
      else if (kind === 'COMMIT' || kind === 'ERROR') {
        const call = calls.get(key!)!;
        call.answeredAt = Number(at);
        call.committed = kind === 'COMMIT';
      }
    }
    return calls;
  };
}

/** When the worker first handled each key. */
function handledAt(lines: readonly string[]): Map<string, number> {
  const handled = new Map<string, number>();
  for (const line of lines) {
    const [kind, key, at] = line.split(' ');
    if (kind === 'HANDLED' && !handled.has(key!)) handled.set(key!, Number(at));
  }
  return handled;
}

async function measure(
  db: TestDatabase,
  calls: Map<string, Call>,
  workerLines: readonly string[],
  seen: { promotedAt: number; probeMs: number | null; listenOnNewPrimary: boolean },
  c: FailoverCase,
): Promise<FailoverFigures> {
  const { promotedAt } = seen;
  const handled = handledAt(workerLines);
  const handledAfter = [...handled.values()].filter((at) => at >= promotedAt);
  const resumeMs = handledAfter.length > 0 ? Math.min(...handledAfter) - promotedAt : null;
  const all = [...calls.entries()];
  const committed = all.filter(([, call]) => call.committed === true).map(([key]) => key);
  const refused = all.filter(([, call]) => call.committed === false).map(([key]) => key);
  const [unpaired] = await db.sql<{ n: number }>(
    `select count(*)::int n from failover_orders o full join event_outbox e on e.payload->>'key' = o.key
      where o.key is null or e.id is null`,
  );
  // Per acknowledged key: is its row there, its event, its effect? Lost whole = none of the three.
  const [lost] = await db.sql<{ lost: number; in_part: number }>(
    `with k as (
       select k.key,
              exists (select 1 from failover_orders o where o.key = k.key) as has_row,
              exists (select 1 from event_outbox e where e.payload->>'key' = k.key) as has_event,
              exists (select 1 from fault_effects f join event_outbox e on e.id = f.event_id
                       where e.payload->>'key' = k.key) as has_effect
         from unnest($1::text[]) as k(key))
     select count(*) filter (where not (has_row and has_event and has_effect))::int as lost,
            count(*) filter (where (has_row or has_event or has_effect)
                               and not (has_row and has_event and has_effect))::int as in_part
       from k`,
    [committed],
  );
  const [inDoubt] = await db.sql<{ n: number }>(
    'select count(*)::int n from failover_orders where key = any($1::text[])',
    [refused],
  );
  const [dead] = await db.sql<{ n: number }>(
    `select count(*)::int n from outbox_deliveries where status = 'dead'`,
  );
  const history = await checkHistory(db, {
    scenario: `failover, ${c.name}`,
    table: 'fault_effects',
    consumers: ['fx-writer'],
    faults: 1,
    recoveryMs: resumeMs ?? -1,
  });
  const answers = all.map(([, call]) => (call.answeredAt ?? Date.now()) - call.beganAt);
  const firstCommitAfter = Math.min(
    ...all
      .filter(([, call]) => call.committed && call.beganAt >= promotedAt)
      .map(([, call]) => call.answeredAt!),
  );
  const latencies = all
    .filter(([key, call]) => call.committed && call.answeredAt! >= promotedAt + 2_000 && handled.has(key))
    .map(([key, call]) => handled.get(key)! - call.answeredAt!)
    .sort((a, b) => a - b);
  return {
    calls: all.length,
    committed: committed.length,
    refused: refused.length,
    unanswered: all.filter(([, call]) => call.answeredAt === undefined).length,
    maxAnswerMs: Math.max(...answers),
    unpaired: unpaired!.n,
    lostAcknowledged: lost!.lost,
    lostInPart: lost!.in_part,
    inDoubtCommitted: inDoubt!.n,
    history,
    dead: dead!.n,
    resumeMs,
    probeMs: seen.probeMs,
    apiResumeMs: Number.isFinite(firstCommitAfter) ? firstCommitAfter - promotedAt : null,
    listenOnNewPrimary: seen.listenOnNewPrimary,
    p99Ms: latencies.length > 0 ? latencies[Math.ceil(latencies.length * 0.99) - 1]! : null,
    p99Samples: latencies.length,
    workerLog: distinctLogLines(workerLines, 6),
  };
}

/** The first `max` of a child's `LOG` lines that differ in more than ids and numbers. */
function distinctLogLines(lines: readonly string[], max: number): string[] {
  const kinds = new Map<string, string>();
  for (const line of lines) {
    if (!line.startsWith('LOG ')) continue;
    const kind = line.replace(/[0-9a-f]{8}-[0-9a-f-]{27}|\d+/g, '#');
    if (!kinds.has(kind)) kinds.set(kind, line.slice(0, 240));
  }
  return [...kinds.values()].slice(0, max);
}
