/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/event-search-cost.ts`
 *
 * What the search indexes of ADR 1013 (migration OutboxEventSearch1764501500000: `event_outbox_name_idx`,
 * `event_outbox_aggregate_idx`, `event_outbox_correlation_idx`) cost `enqueue`: two databases on the same server,
 * each holding HISTORY (default 100,000) events of the tenant, one with the three indexes and one without them,
 * and the peers scenario's enqueue work (a contact row and an event with an aggregate, through the library, on one
 * connection; no correlation id: that index is partial) taking turns in slices of SLICE_MS (default
 * 250 ms), SLICES per variant (default 24). Per commit: Node CPU (`process.cpuUsage`) and the server's CPU (its
 * backends, from /proc: the server must run on this machine), means of 4 groups of consecutive slices.
 */
import 'reflect-metadata';
import { cpuSpentMs, readBackendCpu } from '../harness/backend-cpu';
import { BenchDatabase, BENCH_TENANT } from '../harness/bench-database';
import { drive, libraryTransactor, type Transactor } from '../harness/enqueue-transactors';
import { compare, heading, inGroups, inTurns, openDecisionDatabase, print } from './decision-server';

const SLICE_MS = Number(process.env.SLICE_MS ?? 250);
const SLICES = Number(process.env.SLICES ?? 24);
const HISTORY = Number(process.env.HISTORY ?? 100_000);

const VARIANTS = ['without the search indexes', 'with the search indexes'] as const;
type Variant = (typeof VARIANTS)[number];

async function fill(db: BenchDatabase): Promise<void> {
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at, aggregate_type, aggregate_id, correlation_id)
     select gen_random_uuid(), $1, 'crm.contact.created.v' || (g % 5), '{}'::jsonb, 'published', now(),
            'contact', 'C-' || g, 'req-' || (g / 5)
       from generate_series(1, $2) g`,
    [BENCH_TENANT, HISTORY],
  );
  await db.sql('vacuum analyze event_outbox');
}

async function main(): Promise<void> {
  const { db: withIndexes, serverVersion, close } = await openDecisionDatabase();
  const serverUrl = new URL(withIndexes.url);
  serverUrl.pathname = '/postgres';
  const without = await BenchDatabase.create(serverUrl.toString());
  for (const index of ['event_outbox_name_idx', 'event_outbox_aggregate_idx', 'event_outbox_correlation_idx'])
    await without.sql(`drop index ${index}`);
  await Promise.all([fill(withIndexes), fill(without)]);
  heading(
    `Enqueue with and without the search indexes (ADR 1013): ${HISTORY.toLocaleString('en-US')} events of history, ` +
      `1 connection, ${SLICES} slices of ${SLICE_MS} ms each`,
    serverVersion,
  );
  const databases: Record<Variant, BenchDatabase> = {
    'without the search indexes': without,
    'with the search indexes': withIndexes,
  };
  const transactors = {} as Record<Variant, Transactor>;
  for (const variant of VARIANTS) {
    const name = `search-cost-${VARIANTS.indexOf(variant)}`;
    transactors[variant] = await libraryTransactor(
      databases[variant].url,
      1,
      { side: 'library', business: true, withEvent: true },
      name,
      false,
    );
  }
  try {
    // a warm-up slice each: named statements prepared, caches filled
    for (const variant of VARIANTS) await drive(transactors[variant], 1, SLICE_MS);
    const figures = await inTurns(VARIANTS, SLICES, async (variant) => {
      const name = `search-cost-${VARIANTS.indexOf(variant)}`;
      const db = databases[variant];
      const before = await readBackendCpu((text, values) => db.sql(text, values), [name]);
      const driven = await drive(transactors[variant], 1, SLICE_MS);
      const after = await readBackendCpu((text, values) => db.sql(text, values), [name]);
      const serverMs = cpuSpentMs(before, after);
      return {
        commitsPerSecond: (driven.commits * 1000) / driven.ms,
        nodeUsPerCommit: driven.cpuUs / driven.commits,
        serverUsPerCommit: serverMs === null ? Number.NaN : (serverMs * 1000) / driven.commits,
      };
    });
    compare('commits per second', '/s', inGroups(figures.get('commitsPerSecond')!));
    compare('Node CPU per commit', 'µs', inGroups(figures.get('nodeUsPerCommit')!));
    compare('PostgreSQL CPU per commit (backends)', 'µs', inGroups(figures.get('serverUsPerCommit')!));
    const sizes = await withIndexes.sql<{ name: string; bytes: string }>(
      `select c.relname as name, pg_relation_size(c.oid)::text as bytes from pg_class c
        where c.relname in ('event_outbox', 'event_outbox_pkey', 'event_outbox_name_idx', 'event_outbox_aggregate_idx',
                            'event_outbox_correlation_idx') order by c.relname`,
    );
    print(
      `  sizes after the run: ${sizes.map((s) => `${s.name} ${Math.round(Number(s.bytes) / 1024)} kB`).join(', ')}`,
    );
  } finally {
    for (const variant of VARIANTS) await transactors[variant].close();
    await without.drop();
    await close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
