/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-notify.ts`
 *
 * Why the app's transaction never sends NOTIFY (ADR 0606): business transactions — `begin`, a contact, its
 * event (the library's insert statement), `commit` — on 1 and 8 connections, for BLOCK_MS (default 3,000 ms) per
 * variant and turn: without a NOTIFY (as shipped: the wake-up goes after the commit, on a connection of its
 * own), and with a `pg_notify` inside the transaction. Commits per second, and commits per WAL flush (how well
 * group commit works; sessions are closed after each block so that their flush counts are published).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { BENCH_EVENT, BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { WalFlushCounter } from '../harness/server-info';
import { now } from '../harness/stats';
import { insertContact } from '../raw/raw.queries';
import { insertEvent, outboxNames } from '../../libs/outbox/src/store/sql';
import { compare, heading, inTurns, openDecisionDatabase, print } from './decision-server';

const NAMES = outboxNames();
const WAKEUP_CHANNEL = NAMES.wakeupChannel;

const BLOCK_MS = Number(process.env.BLOCK_MS ?? 3000);
const TURNS = Number(process.env.TURNS ?? 3);
const APPLICATION = 'decision-enqueue';

type Variant = 'no NOTIFY in the transaction' | 'NOTIFY in the transaction';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `Business transaction + event, ${BLOCK_MS} ms per variant and turn, ${TURNS} turns`,
      serverVersion,
    );
    const flushes = await WalFlushCounter.detect(db);
    if (!flushes.source) print('  (this server does not count WAL flushes: commits per flush not shown)');
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    // someone listens, as the relays of other processes do: PostgreSQL queues a notification only then
    await listener.query(`listen ${WAKEUP_CHANNEL}`);
    try {
      for (const connections of [1, 8]) {
        const variants: Variant[] = ['no NOTIFY in the transaction', 'NOTIFY in the transaction'];
        const figures = await inTurns(variants, TURNS, (variant) =>
          block(db, flushes, connections, variant === 'NOTIFY in the transaction'),
        );
        compare(
          `${connections} connection${connections > 1 ? 's' : ''}: commits/s`,
          '/s',
          figures.get('rate')!,
        );
        if (flushes.source)
          compare(
            `${connections} connection${connections > 1 ? 's' : ''}: commits per WAL flush`,
            '',
            figures.get('perFlush')!,
          );
      }
    } finally {
      await listener.end();
    }
  } finally {
    await close();
  }
}

/** `connections` sessions committing business transactions for BLOCK_MS; commits/s and commits per WAL flush. */
async function block(
  db: BenchDatabase,
  flushes: WalFlushCounter,
  connections: number,
  notifyInside: boolean,
): Promise<{ rate: number; perFlush: number }> {
  await db.truncate();
  await db.checkpoint();
  const clients = await Promise.all(
    Array.from({ length: connections }, async () => {
      const client = new Client({ connectionString: db.url, application_name: APPLICATION });
      await client.connect();
      return client;
    }),
  );
  const flushesBefore = await flushes.read();
  let commits = 0;
  const began = now();
  await Promise.all(
    clients.map(async (client) => {
      while (now() - began < BLOCK_MS) {
        const contact = randomUUID();
        await client.query('begin');
        const row = insertContact(contact, BENCH_TENANT, 'Contact', 'contact@example.com');
        await client.query(row.text, row.values as unknown[]);
        const event = insertEvent(NAMES, {
          id: randomUUID(),
          tenantId: BENCH_TENANT,
          eventName: BENCH_EVENT,
          payloadJson: JSON.stringify({ contactId: contact }),
          aggregateType: 'contact',
          aggregateId: contact,
          correlationId: null,
          schemaVersion: 1,
          occurredAt: null,
        });
        await client.query(event.text, event.values as unknown[]);
        if (notifyInside) await client.query('select pg_notify($1, $2)', [WAKEUP_CHANNEL, BENCH_TENANT]);
        await client.query('commit');
        commits++;
      }
    }),
  );
  const elapsed = now() - began;
  await Promise.all(clients.map((c) => c.end()));
  await db.waitForSessionsToEnd(APPLICATION);
  const flushesAfter = await flushes.read();
  const flushed = flushesBefore === null || flushesAfter === null ? Number.NaN : flushesAfter - flushesBefore;
  return { rate: (commits / elapsed) * 1000, perFlush: commits / flushed };
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
