/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-notify.ts`
 *
 * Where the wake-up NOTIFY goes (ADRs 0606 and 0805): business transactions — `begin`, a contact, its event (the
 * library's insert statement), `commit` — on 1 and 8 connections, for BLOCK_MS (default 3,000 ms) per variant and
 * turn: with no wake-up at all; with a `pg_notify` in every transaction; with one per WIDEST_GAP_MS (the pacer's
 * widest gap under sustained load) sent on a connection of its own after a commit (as before ADR 0805); and with one
 * per WIDEST_GAP_MS carried by that transaction's insert (as shipped). Commits per second, and commits per WAL
 * flush (how well group commit works; sessions are closed after each block so that their flush counts are
 * published).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { BENCH_EVENT, BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { WalFlushCounter } from '../harness/server-info';
import { now } from '../harness/stats';
import { insertContact } from '../raw/raw.queries';
import { carryingWakeup, insertEvent, notifyWakeup, outboxNames } from '../../libs/outbox/src/store/sql';
import { compare, heading, inTurns, openDecisionDatabase, print } from './decision-server';

const NAMES = outboxNames();
const WAKEUP_CHANNEL = NAMES.wakeupChannel;

const BLOCK_MS = Number(process.env.BLOCK_MS ?? 3000);
const TURNS = Number(process.env.TURNS ?? 3);
const APPLICATION = 'decision-enqueue';

/** The pacer's widest gap at its default (`relay.notifyGapMs` 2 ms, five times): the gap under sustained load. */
const WIDEST_GAP_MS = 10;

const VARIANTS = [
  'no wake-up',
  'NOTIFY in every transaction',
  `one per ${WIDEST_GAP_MS} ms after a commit, on its own connection`,
  `one per ${WIDEST_GAP_MS} ms carried by an insert`,
] as const;
type Variant = (typeof VARIANTS)[number];

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
        const figures = await inTurns(VARIANTS, TURNS, (variant) => block(db, flushes, connections, variant));
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
  variant: Variant,
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
  const notifier = new Client({ connectionString: db.url, application_name: APPLICATION });
  await notifier.connect();
  const pooled: { inFlight: Promise<unknown> | null } = { inFlight: null };
  let lastWakeAt = Number.NEGATIVE_INFINITY;
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
        const due = now() - lastWakeAt >= WIDEST_GAP_MS;
        const carried = variant === VARIANTS[3] && due;
        if (carried) lastWakeAt = now();
        const insert = carried ? carryingWakeup(NAMES, event, BENCH_TENANT) : event;
        await client.query(insert.text, insert.values as unknown[]);
        if (variant === VARIANTS[1])
          await client.query('select pg_notify($1, $2)', [WAKEUP_CHANNEL, BENCH_TENANT]);
        await client.query('commit');
        commits++;
        if (variant === VARIANTS[2] && due && !pooled.inFlight) {
          // as the pacer did: not awaited by the commit, one at a time
          lastWakeAt = now();
          const wake = notifyWakeup(NAMES, [BENCH_TENANT]);
          pooled.inFlight = notifier
            .query(wake.text, wake.values as unknown[])
            .finally(() => (pooled.inFlight = null));
        }
      }
    }),
  );
  const elapsed = now() - began;
  await pooled.inFlight;
  await Promise.all([...clients, notifier].map((c) => c.end()));
  await db.waitForSessionsToEnd(APPLICATION);
  const flushesAfter = await flushes.read();
  const flushed = flushesBefore === null || flushesAfter === null ? Number.NaN : flushesAfter - flushesBefore;
  return { rate: (commits / elapsed) * 1000, perFlush: commits / flushed };
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
