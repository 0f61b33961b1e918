/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/dedupe-key-cost.ts`
 *
 * What an idempotency key costs `enqueue` (ADR 1103): the peers scenario's enqueue work — TypeORM's
 * `transaction()`, a contact through the manager, then the event — at 1 connection, every variant's app open at
 * once, taking turns in slices of SLICE_MS (default 250 ms), SLICES per variant (default 24), shown as the means of
 * 4 groups of consecutive slices (ratios to the first variant):
 * - the library without a key (as shipped: the named insert);
 * - the library with a fresh key per commit (`dedupe: { key }`: the key is free, the event is written);
 * - the library with a key that is taken (every commit repeats one key: nothing written, the first id returned);
 * - the library with a taken key in mode 'replace' (the first event, pending, gets the payload);
 * - graphile-worker `job_key` and pg-boss `singletonKey` (+ `singletonSeconds`), a fresh key per commit, one job
 *   per consumer for the peers scenario's two no-op consumers, as the peers scenario's keyed line.
 * Per commit: the rate, Node CPU (this process), the server's CPU (/proc: the server must run on this machine) and
 * statements (pg_stat_statements, when loaded).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { RowsQuery } from '../harness/backend-cpu';
import { createBenchApp } from '../harness/bench-app';
import { BENCH_TENANT } from '../harness/bench-database';
import { insertContact } from '../raw/raw.queries';
import {
  contactEvent,
  drive,
  libraryTransactor,
  peerTransactor,
  type Transactor,
} from '../harness/enqueue-transactors';
import { StatementStats } from '../harness/statement-stats';
import { graphileWorkerPeer } from '../peers/graphile-worker.peer';
import { pgBossPeer } from '../peers/pg-boss.peer';
import {
  compareEnqueue,
  enqueueSlice,
  exitWhenDone,
  heading,
  inTurns,
  openDecisionDatabase,
  print,
} from './decision-server';

const SLICE_MS = Number(process.env.SLICE_MS ?? 250);
const SLICES = Number(process.env.SLICES ?? 24);
const LIBRARY = { side: 'library', business: true, withEvent: true } as const;

/** The library's transaction with every event under one key, taken once before the timed slices. */
async function takenKeyTransactor(
  url: string,
  name: string,
  mode: 'ignore' | 'replace',
): Promise<Transactor> {
  const app = await createBenchApp({ url, consumers: [], poolSize: 10, applicationName: name, probe: false });
  const key = randomUUID();
  return {
    statements: () => Number.NaN,
    run: () =>
      app.dataSource.transaction(async (manager) => {
        const { contact, event } = contactEvent();
        const insert = insertContact(contact.id, BENCH_TENANT, contact.name, contact.email);
        await manager.query(insert.text, insert.values);
        await app.outbox.enqueue(manager, { ...event, dedupe: { key, mode } });
      }),
    close: () => app.close(),
  };
}

const OPENERS: Record<string, (url: string, name: string) => Promise<Transactor>> = {
  'library, no key': (url, name) => libraryTransactor(url, 1, LIBRARY, name, false),
  'library, fresh key': (url, name) => libraryTransactor(url, 1, { ...LIBRARY, keyed: true }, name, false),
  'library, taken key (ignored)': (url, name) => takenKeyTransactor(url, name, 'ignore'),
  'library, taken key (replaced)': (url, name) => takenKeyTransactor(url, name, 'replace'),
  'graphile-worker job_key': (url, name) => peerTransactor(url, 1, graphileWorkerPeer, name, true),
  'pg-boss singletonKey': (url, name) => peerTransactor(url, 1, pgBossPeer, name, true),
};
const VARIANTS = Object.keys(OPENERS);
const PEERS = [graphileWorkerPeer, pgBossPeer];

function applicationName(variant: string): string {
  return `decision-dedupe-${VARIANTS.indexOf(variant)}`;
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase({
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track': 'none',
  });
  const stats = await StatementStats.enable(db);
  const query = db.sql.bind(db) as RowsQuery;
  for (const peer of PEERS) {
    await peer.uninstall(db);
    await peer.install(db);
  }
  const apps = new Map<string, Transactor>();
  try {
    heading(
      `Business transaction + keyed event, 1 connection, ${SLICES} slices of ${SLICE_MS} ms per variant`,
      serverVersion,
    );
    for (const variant of VARIANTS)
      apps.set(variant, await OPENERS[variant]!(db.url, applicationName(variant)));
    for (const app of apps.values()) await drive(app, 1, 300);
    const figures = await inTurns(VARIANTS, SLICES, (variant) =>
      enqueueSlice(apps.get(variant)!, 1, SLICE_MS, applicationName(variant), query, stats),
    );
    compareEnqueue('', figures);
    print('  (goal: the library with a fresh key ≥ 1.0× the best peer in commits/s, ≤ its CPU per commit)');
  } finally {
    for (const app of apps.values()) await app.close();
    for (const peer of PEERS) await peer.uninstall(db);
    await stats.disable();
    await close();
  }
}

exitWhenDone(main());
