/**
 * `flock /tmp/team/bench.lock node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/search-index-cost.ts`
 *
 * What the three search indexes of ADR 1013 (`event_outbox_name_idx`, `event_outbox_aggregate_idx`,
 * `event_outbox_correlation_idx`, opt-in since: `npx nestjs-pg-outbox sql --search-indexes`) cost per event, in one
 * run, side by side: two databases on the same server, one with the three indexes and one without them, each holding HISTORY (default
 * 100,000) published events of the tenant, every one with an aggregate and a correlation id.
 *
 * - Enqueue: the library's `enqueue` of an event with an aggregate beside a business row, one connection, in turns
 *   of SLICE_MS (default 250 ms), SLICES per variant (default 24); means of 4 groups of consecutive slices.
 * - Drain: `drain()` of EVENTS (default 10,000) pending events (aggregate and correlation id set) by two consumers,
 *   one writing a row, after the same history; ROUNDS (default 4) per variant, in turns. Every status update of
 *   an event writes a new tuple into every index whose predicate it matches (no HOT update: `status` is in the
 *   partial indexes' predicates), so the drain pays for the indexes again, once per update.
 *
 * Per event: Node CPU (`process.cpuUsage`) and the app's PostgreSQL backends' CPU (from /proc: the server must run
 * on this machine). Then the bytes of each index per 100,000 events of history.
 */
import 'reflect-metadata';
import { cpuSpentMs, readBackendCpu } from '../harness/backend-cpu';
import { createBenchApp } from '../harness/bench-app';
import { BenchDatabase, BENCH_TENANT } from '../harness/bench-database';
import { consumerClass } from '../harness/bench-consumers';
import { measureDrain } from '../harness/drain-cost';
import { drive, libraryTransactor, type Transactor } from '../harness/enqueue-transactors';
import { SEARCH_INDEXES, searchIndexesSql } from '../../libs/outbox/src/maintenance/outbox-indexes';
import {
  compare,
  exitWhenDone,
  heading,
  inGroups,
  inTurns,
  openDecisionDatabase,
  print,
} from './decision-server';

const SLICE_MS = Number(process.env.SLICE_MS ?? 250);
const SLICES = Number(process.env.SLICES ?? 24);
const HISTORY = Number(process.env.HISTORY ?? 100_000);
const EVENTS = Number(process.env.EVENTS ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 4);

const SEARCH_INDEX_NAMES = SEARCH_INDEXES.map((index) => index.name);
const VARIANTS = ['without the search indexes', 'with the search indexes'] as const;
type Variant = (typeof VARIANTS)[number];

/** HISTORY published events of the tenant, five names, each with an aggregate and a correlation id. */
async function fillHistory(db: BenchDatabase): Promise<void> {
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at, aggregate_type, aggregate_id, correlation_id)
     select gen_random_uuid(), $1, 'crm.contact.created.v' || (g % 5), '{}'::jsonb, 'published', now(),
            'contact', 'C-' || g, 'req-' || (g / 5)
       from generate_series(1, $2) g`,
    [BENCH_TENANT, HISTORY],
  );
  await db.sql('vacuum analyze event_outbox');
}

async function indexBytes(db: BenchDatabase): Promise<string> {
  const sizes = await db.sql<{ name: string; bytes: string }>(
    `select c.relname as name, pg_relation_size(c.oid)::text as bytes from pg_class c
      where c.relname = any($1::text[]) order by c.relname`,
    [['event_outbox', 'event_outbox_pkey', ...SEARCH_INDEX_NAMES]],
  );
  const per100k = (bytes: string): string =>
    `${(((Number(bytes) / HISTORY) * 100_000) / 1024 / 1024).toFixed(1)} MB`;
  return sizes.map((s) => `${s.name} ${per100k(s.bytes)}`).join(', ');
}

async function compareEnqueue(databases: Record<Variant, BenchDatabase>): Promise<void> {
  const transactors = {} as Record<Variant, Transactor>;
  const name = (variant: Variant): string => `search-index-enqueue-${VARIANTS.indexOf(variant)}`;
  for (const variant of VARIANTS)
    transactors[variant] = await libraryTransactor(
      databases[variant].url,
      1,
      { side: 'library', business: true, withEvent: true },
      name(variant),
      false,
    );
  try {
    for (const variant of VARIANTS) await drive(transactors[variant], 1, SLICE_MS); // warm-up
    const figures = await inTurns(VARIANTS, SLICES, async (variant) => {
      const db = databases[variant];
      const query = db.sql.bind(db) as Parameters<typeof readBackendCpu>[0];
      const before = await readBackendCpu(query, [name(variant)]);
      const driven = await drive(transactors[variant], 1, SLICE_MS);
      const serverMs = cpuSpentMs(before, await readBackendCpu(query, [name(variant)]));
      return {
        nodeUsPerCommit: driven.cpuUs / driven.commits,
        serverUsPerCommit: serverMs === null ? Number.NaN : (serverMs * 1000) / driven.commits,
        commitsPerSecond: (driven.commits * 1000) / driven.ms,
      };
    });
    print(`Enqueue, 1 connection, ${SLICES} slices of ${SLICE_MS} ms per variant (medians of 4 group means)`);
    compare('PostgreSQL CPU per commit (backends)', 'µs', inGroups(figures.get('serverUsPerCommit')!));
    compare('Node CPU per commit', 'µs', inGroups(figures.get('nodeUsPerCommit')!));
    compare('commits per second', '/s', inGroups(figures.get('commitsPerSecond')!));
  } finally {
    for (const variant of VARIANTS) await transactors[variant].close();
  }
}

async function compareDrain(databases: Record<Variant, BenchDatabase>): Promise<void> {
  const figures = await inTurns(VARIANTS, ROUNDS, async (variant) => {
    const db = databases[variant];
    const applicationName = `search-index-drain-${VARIANTS.indexOf(variant)}`;
    await db.truncate();
    await fillHistory(db);
    await db.loadPendingEvents(EVENTS);
    await db.sql(`update event_outbox set correlation_id = 'req-' || (seq / 5) where status = 'pending'`);
    await db.sql('vacuum analyze event_outbox');
    await db.checkpoint();
    const app = await createBenchApp({
      url: db.url,
      consumers: [consumerClass('db-write')],
      relay: { enabled: false },
      policy: {},
      applicationName,
      probe: false,
    });
    try {
      const { serverUs, nodeUs, eventsPerSecond } = await measureDrain(app, db, applicationName, EVENTS);
      return { serverUs, nodeUs, totalUs: serverUs + nodeUs, eventsPerSecond };
    } finally {
      await app.close();
    }
  });
  print(
    `Drain of ${EVENTS.toLocaleString('en-US')} events × 2 consumers (one writes a row), ${ROUNDS} rounds per variant`,
  );
  compare('PostgreSQL CPU per event (backends)', 'µs', figures.get('serverUs')!);
  compare('Node CPU per event', 'µs', figures.get('nodeUs')!);
  compare('Node + PostgreSQL CPU per event', 'µs', figures.get('totalUs')!);
  compare('events per second', '/s', figures.get('eventsPerSecond')!);
}

async function main(): Promise<void> {
  const { db: withIndexes, serverVersion, close } = await openDecisionDatabase();
  const serverUrl = new URL(withIndexes.url);
  serverUrl.pathname = '/postgres';
  const without = await BenchDatabase.create(serverUrl.toString());
  try {
    // the migrations create none of them (they are opt-in): the 'with' database gets them as the CLI prints them
    for (const statement of searchIndexesSql('public')
      .split(';\n')
      .filter((s) => s.trim() !== ''))
      await withIndexes.sql(statement);
    for (const index of SEARCH_INDEX_NAMES) await without.sql(`drop index if exists ${index}`);
    heading(
      `The search indexes of ADR 1013, with and without: ${HISTORY.toLocaleString('en-US')} events of history`,
      serverVersion,
    );
    await Promise.all([fillHistory(withIndexes), fillHistory(without)]);
    print(`  per 100,000 events of history: ${await indexBytes(withIndexes)}`);
    const databases: Record<Variant, BenchDatabase> = {
      'without the search indexes': without,
      'with the search indexes': withIndexes,
    };
    await compareEnqueue(databases);
    await compareDrain(databases);
  } finally {
    await without.drop();
    await close();
  }
}

exitWhenDone(main());
