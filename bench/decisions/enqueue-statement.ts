/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-statement.ts`
 *
 * What `enqueue`'s insert costs the server, unnamed (parsed, analysed and planned at every execution) and named
 * (parsed once per connection by pg, ADR 0807): business transactions — `begin`, a contact, its event, `commit` —
 * back to back on one connection, TRANSACTIONS (default 4,000) per variant and turn, the server's CPU per
 * transaction read from /proc (the server must run on this machine: embedded, or a local DATABASE_URL). Beside
 * them: the hand-written insert of the benchmark's raw line (fewer columns), unnamed and named, and no event at
 * all (what the contact and the transaction cost alone).
 *
 * Then the peers scenario's enqueue work through a Nest app at 1 and 8 connections (TypeORM's `transaction()`, a
 * contact, the event): the library as shipped, the library with `preparedStatements: false`, the hand-written
 * insert through the manager (raw) and pg-transactional-outbox's call, all open at once, taking turns in slices of
 * SLICE_MS (default 250 ms), SLICES per variant (default 24), shown as the means of 4 groups of consecutive slices: commits/s, server and
 * Node CPU per commit.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Client, type QueryConfig } from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { readBackendCpu, cpuSpentMs } from '../harness/backend-cpu';
import {
  drive,
  libraryTransactor,
  peerTransactor,
  rawEventInsert,
  typeormTransactor,
  type Transactor,
} from '../harness/enqueue-transactors';
import { pgTransactionalOutboxPeer } from '../peers/pg-transactional-outbox.peer';
import { BENCH_EVENT, BENCH_TENANT } from '../harness/bench-database';
import { insertContact, insertEvent as rawInsertEvent } from '../raw/raw.queries';
import { insertEvent, outboxNames, type SqlStatement } from '../../libs/outbox/src/store/sql';
import { compare, heading, inGroups, inTurns, openDecisionDatabase, print } from './decision-server';

const NAMES = outboxNames();
const TRANSACTIONS = Number(process.env.TRANSACTIONS ?? 4000);
const TURNS = Number(process.env.TURNS ?? 5);
const APPLICATION = 'decision-enqueue-statement';
const SLICE_MS = Number(process.env.SLICE_MS ?? 250);
const SLICES = Number(process.env.SLICES ?? 24);

const APP_VARIANTS = [
  'library (as shipped)',
  'library, preparedStatements false',
  'raw insert through the manager',
  'pg-transactional-outbox',
] as const;
type AppVariant = (typeof APP_VARIANTS)[number];

async function openApp(url: string, variant: AppVariant, connections: number): Promise<Transactor> {
  const name = `decision-${APP_VARIANTS.indexOf(variant)}`;
  const workload = { side: 'library', business: true, withEvent: true } as const;
  if (variant === 'library (as shipped)') return libraryTransactor(url, connections, workload, name, false);
  if (variant === 'library, preparedStatements false')
    return libraryTransactor(url, connections, { ...workload, preparedStatements: false }, name, false);
  if (variant === 'raw insert through the manager')
    return typeormTransactor(url, connections, name, async (manager) => {
      const insert = rawEventInsert();
      await manager.query(insert.text, insert.values);
    });
  return peerTransactor(url, connections, pgTransactionalOutboxPeer, name);
}

/** The enqueue work through a Nest app, each variant's transactions in slices taking turns. */
async function throughTheApp(db: Awaited<ReturnType<typeof openDecisionDatabase>>['db']): Promise<void> {
  await pgTransactionalOutboxPeer.uninstall(db);
  await pgTransactionalOutboxPeer.install(db);
  try {
    for (const connections of [1, 8]) {
      const apps = new Map<AppVariant, Transactor>();
      for (const variant of APP_VARIANTS) apps.set(variant, await openApp(db.url, variant, connections));
      try {
        await db.truncate();
        for (const app of apps.values()) await drive(app, connections, 300);
        const figures = await inTurns(APP_VARIANTS, SLICES, async (variant) => {
          const names = [`decision-${APP_VARIANTS.indexOf(variant)}`];
          const before = await readBackendCpu(db.sql.bind(db), names);
          const slice = await drive(apps.get(variant)!, connections, SLICE_MS);
          const serverMs = cpuSpentMs(before, await readBackendCpu(db.sql.bind(db), names)) ?? Number.NaN;
          return {
            rate: (slice.commits * 1000) / slice.ms,
            server: (serverMs * 1000) / slice.commits,
            node: slice.cpuUs / slice.commits,
          };
        });
        const label = `${connections} connection${connections > 1 ? 's' : ''}`;
        compare(`${label}: commits/s`, '/s', inGroups(figures.get('rate')!));
        compare(`${label}: server CPU per commit`, 'µs', inGroups(figures.get('server')!));
        compare(`${label}: Node CPU per commit`, 'µs', inGroups(figures.get('node')!));
      } finally {
        for (const app of apps.values()) await app.close();
      }
    }
  } finally {
    await pgTransactionalOutboxPeer.uninstall(db);
  }
}

/** Each variant's insert (none: the contact alone) and whether it runs named. */
const VARIANTS = {
  "enqueue's insert, unnamed": { insert: 'enqueue', named: false },
  "enqueue's insert, named (as shipped)": { insert: 'enqueue', named: true },
  'hand-written insert, unnamed': { insert: 'raw', named: false },
  'hand-written insert, named': { insert: 'raw', named: true },
  'no event': { insert: null, named: false },
} as const;
type Variant = keyof typeof VARIANTS;

function eventOf(variant: Variant, contactId: string): QueryConfig | null {
  const { insert, named } = VARIANTS[variant];
  if (insert === null) return null;
  const event = {
    id: uuidv7(),
    tenantId: BENCH_TENANT,
    eventName: BENCH_EVENT,
    payloadJson: JSON.stringify({ contactId, name: 'Contact', email: 'contact@example.com' }),
    aggregateType: 'contact',
    aggregateId: contactId,
  };
  const statement: SqlStatement =
    insert === 'enqueue'
      ? insertEvent(NAMES, { ...event, correlationId: null, schemaVersion: 1, occurredAt: null })
      : rawInsertEvent(event);
  return named
    ? { name: `decision_${insert}`, text: statement.text, values: statement.values }
    : { text: statement.text, values: statement.values };
}

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const client = new Client({ connectionString: db.url, application_name: APPLICATION });
  await client.connect();
  try {
    heading(
      `Business transaction + event, ${TRANSACTIONS.toLocaleString('en-US')} per variant and turn, ${TURNS} turns`,
      serverVersion,
    );
    const figures = await inTurns(Object.keys(VARIANTS) as Variant[], TURNS, async (variant) => {
      await db.truncate();
      const before = await readBackendCpu(db.sql.bind(db), [APPLICATION]);
      for (let i = 0; i < TRANSACTIONS; i++) {
        const contactId = randomUUID();
        const contact = insertContact(contactId, BENCH_TENANT, 'Contact', 'contact@example.com');
        await client.query('begin');
        await client.query(contact.text, contact.values);
        const event = eventOf(variant, contactId);
        if (event) await client.query(event);
        await client.query('commit');
      }
      const ms = cpuSpentMs(before, await readBackendCpu(db.sql.bind(db), [APPLICATION]));
      if (ms === null) throw new Error('the server runs elsewhere: its CPU cannot be read from /proc');
      return { 'server CPU': (ms * 1000) / TRANSACTIONS };
    });
    compare('server CPU per transaction', 'µs', figures.get('server CPU')!);
    print('  (the event costs the difference to "no event")');
    await throughTheApp(db);
  } finally {
    await client.end();
    await close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
