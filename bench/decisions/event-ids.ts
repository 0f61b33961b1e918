/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/event-ids.ts`
 *
 * Why event ids are UUIDv7 (ADR 0607): ROWS (default 200,000) events inserted with the library's insert statement,
 * 500 per transaction, each with two inbox rows (as two delivered consumers leave, event by event), once with UUIDv7 ids (what
 * `enqueue` generates) and once with random UUIDv4 ids, in turns, on empty tables. A checkpoint every
 * CHECKPOINT_EVERY (default 50,000) events stands in for the server's own: after each, the first change to
 * every page writes a full-page image to WAL. WAL bytes and full-page images per event, the two primary-key
 * indexes' size, and the time taken.
 */
import 'reflect-metadata';
import { v4, v7 } from 'uuid';
import { BENCH_EVENT, BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { now } from '../harness/stats';
import { insertEvents, outboxNames } from '../../libs/outbox/src/store/sql';
import { compare, heading, inTurns, openDecisionDatabase } from './decision-server';

const NAMES = outboxNames();

const ROWS = Number(process.env.ROWS ?? 200_000);
const PER_TRANSACTION = 500;
const CHECKPOINT_EVERY = Number(process.env.CHECKPOINT_EVERY ?? 50_000);
const TURNS = Number(process.env.TURNS ?? 2);

type Variant = 'UUIDv7 (as shipped)' | 'UUIDv4';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(`${ROWS.toLocaleString('en-US')} events with 2 inbox rows each, ${TURNS} turns`, serverVersion);
    const figures = await inTurns<Variant, string>(['UUIDv7 (as shipped)', 'UUIDv4'], TURNS, (variant) =>
      load(db, variant === 'UUIDv4' ? v4 : v7),
    );
    compare('WAL bytes per event', 'B', figures.get('wal')!);
    compare('full-page images per 1,000 events', '', figures.get('fpi')!);
    compare('event_outbox primary key', 'MB', figures.get('eventsKey')!);
    compare('consumer_inbox primary key', 'MB', figures.get('inboxKey')!);
    compare('time to insert', 's', figures.get('seconds')!);
  } finally {
    await close();
  }
}

async function load(db: BenchDatabase, id: () => string): Promise<Record<string, number>> {
  await db.truncate();
  await db.checkpoint();
  const [before] = await db.sql<{ fpi: string }>('select wal_fpi::text as fpi from pg_stat_wal');
  const wal = await db.walPosition();
  const began = now();
  for (let done = 0; done < ROWS; done += PER_TRANSACTION) {
    if (done > 0 && done % CHECKPOINT_EVERY === 0) await db.checkpoint();
    const rows = Array.from({ length: PER_TRANSACTION }, (_, i) => ({
      id: id(),
      tenantId: BENCH_TENANT,
      eventName: BENCH_EVENT,
      payloadJson: JSON.stringify({ n: done + i }),
      aggregateType: null,
      aggregateId: null,
      correlationId: null,
      schemaVersion: 1,
      occurredAt: null,
    }));
    const events = insertEvents(NAMES, rows);
    await db.sql('begin');
    await db.sql(events.text, events.values as unknown[]);
    await db.sql(
      `insert into public.consumer_inbox (event_id, consumer_name, tenant_id)
       select e.id, c, $2 from unnest($1::uuid[]) with ordinality as e(id, n)
        cross join unnest(array['bench.audit', 'bench.notify']) c order by e.n, c`,
      [rows.map((r) => r.id), BENCH_TENANT],
    );
    await db.sql('commit');
  }
  const seconds = (now() - began) / 1000;
  const walBytes = await db.walBytesSince(wal);
  await db.sql('select pg_stat_force_next_flush()');
  await db.sql('select pg_stat_clear_snapshot()');
  const [after] = await db.sql<{ fpi: string }>('select wal_fpi::text as fpi from pg_stat_wal');
  const [sizes] = await db.sql<{ events: string; inbox: string }>(
    `select pg_relation_size('public.event_outbox_pkey')::text as events,
            pg_relation_size('public.consumer_inbox_pkey')::text as inbox`,
  );
  return {
    wal: walBytes / ROWS,
    fpi: ((Number(after!.fpi) - Number(before!.fpi)) / ROWS) * 1000,
    eventsKey: Number(sizes!.events) / 2 ** 20,
    inboxKey: Number(sizes!.inbox) / 2 ** 20,
    seconds,
  };
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
