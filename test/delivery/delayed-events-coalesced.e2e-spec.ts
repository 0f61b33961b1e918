/**
 * Delayed events, the relay's side (docs/adr/1204-delayed-promotions-are-coalesced.md): its timer fires at most
 * once per `relay.scheduledCoalesceMs`, so events due close together are promoted together, never before their
 * time by the database's clock; a poll sends no promotion while the relay hears wake-ups, yet a delayed event
 * written by another app instance is found on time (by its NOTIFY) or, when that instance does not notify, by the
 * relay's recheck every RECHECK_POLLS polls.
 */
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_TABLE_SQL,
  effectIds,
  enqueueIn,
  enqueueManyIn,
  recordEffect,
  TENANTS,
  truncateOutbox,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';
import { OUTBOX_STORE_PORT, type OutboxStorePort } from '../../libs/outbox/src/store/outbox-store.port';
import { RECHECK_POLLS } from '../../libs/outbox/src/relay/scheduled-promoter';
import type { OutboxRelayOptions } from '../../libs/outbox/src/options/outbox-module-options.interface';

/** Writes an effect row in its batch transaction: its `created_at` is the batch's start, by the database's clock. */
@Injectable()
class Recorder {
  @OnOutboxEvent('test.co.*', { consumer: 'plain' })
  plain(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

let db: TestDatabase;
const apps: TestApp[] = [];

/** An app with `relay` options (its relay runs on its own), or none (no relay; it notifies by default). */
async function start(
  relay?: OutboxRelayOptions,
  wakeUps?: OutboxRelayOptions['wakeUps'],
): Promise<{ app: TestApp; promotions: () => number }> {
  const app = await buildApp({
    url: db.url,
    providers: [Recorder],
    outbox: relay ? { relay: { enabled: true, ...relay } } : wakeUps ? { relay: { wakeUps } } : undefined,
  });
  apps.push(app);
  await app.relay.heartbeat();
  // counts the promotions this app's relay sends (each still goes to the database)
  const promote = jest.spyOn(storeOf(app), 'promoteScheduled');
  return { app, promotions: () => promote.mock.calls.length };
}

function storeOf(app: TestApp): OutboxStorePort {
  return app.app.get<OutboxStorePort>(OUTBOX_STORE_PORT);
}

/** Each delivered event's handler start − its deliver_at, in ms, by the database's clock. */
async function lateness(): Promise<number[]> {
  const rows = await db.sql<{ ms: number }>(
    `select (extract(epoch from f.created_at - e.deliver_at) * 1000)::float8 as ms
       from event_outbox e join test_effects f on f.event_id = e.id and f.consumer = 'plain'`,
  );
  return rows.map((r) => r.ms);
}

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL]);
});
afterAll(async () => {
  while (apps.length > 0) await apps.pop()!.close();
  await db?.drop();
});
beforeEach(async () => {
  await truncateOutbox(db, 'test_effects');
});
afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

describe('a relay coalescing its promotions (relay.scheduledCoalesceMs)', () => {
  it('promotes events due close together in a few promotions, every tenant of each at once, none before its time by the database clock', async () => {
    const enqueuer = await start();
    const relay = await start({ pollIntervalMs: 60_000, scheduledCoalesceMs: 200 });
    const count = 40;
    const [now] = await db.sql<{ at: Date }>('select clock_timestamp() as at');
    // due 20 ms apart over 800 ms, from 500 ms on, across three tenants
    const ids = await enqueueManyIn(
      enqueuer.app,
      Array.from({ length: count }, (_, i) => ({
        eventName: 'test.co.a.v1',
        tenantId: TENANTS[i % TENANTS.length],
        payload: { i },
        deliverAt: new Date(now!.at.getTime() + 500 + 20 * i),
      })),
    );
    const before = relay.promotions();
    await waitFor(async () => (await effectIds(db, 'plain')).length >= count, {
      timeoutMs: 15_000,
      message: `${count} delayed events delivered`,
    });
    expect((await effectIds(db, 'plain')).sort()).toEqual([...ids].sort());
    const late = await lateness();
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    // the window plus a round, far from the once-a-minute poll
    expect(Math.max(...late)).toBeLessThan(1000);
    // a timer at every due instant would send about one promotion per event: 800 ms / 200 ms, the wake-up of
    // the enqueue, the first due instant and the last window make 7 at most
    expect(relay.promotions() - before).toBeLessThanOrEqual(7);
  });

  it('with 0, still delivers each event on time and not before it', async () => {
    const relay = await start({ pollIntervalMs: 60_000, scheduledCoalesceMs: 0 });
    const ids = await enqueueManyIn(
      relay.app,
      Array.from({ length: 5 }, (_, i) => ({ eventName: 'test.co.a.v1', delayMs: 200 + 50 * i })),
    );
    await waitFor(async () => (await effectIds(db, 'plain')).length >= ids.length, { timeoutMs: 10_000 });
    const late = await lateness();
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...late)).toBeLessThan(1000);
  });
});

describe('a relay that knows nothing is scheduled', () => {
  it('sends no promotion at its polls while it hears wake-ups', async () => {
    const relay = await start({ pollIntervalMs: 100 });
    const scan = jest.spyOn(storeOf(relay.app), 'dueTenants');
    // its first round promoted (nothing scheduled)
    await waitFor(() => relay.app.relay.lastRoundAt !== null, { timeoutMs: 5_000 });
    const before = relay.promotions();
    const scansBefore = scan.mock.calls.length;
    // each poll's round scans for due tenants: count polls by their scans, short of the recheck
    await waitFor(() => scan.mock.calls.length - scansBefore >= RECHECK_POLLS - 3, {
      timeoutMs: 5_000,
      message: 'polls',
    });
    expect(relay.promotions() - before).toBe(0);
  });

  it('picks up a delayed event another app instance writes, on time, by its wake-up', async () => {
    const relay = await start({ pollIntervalMs: 60_000 });
    // a round that promotes nothing: it knows nothing is scheduled, and sets no timer
    relay.app.relay.wake();
    await waitFor(() => relay.promotions() === 1 && relay.app.relay.lastRoundAt !== null, {
      timeoutMs: 5_000,
    });
    const enqueuer = await start();
    const id = await enqueueIn(enqueuer.app, { eventName: 'test.co.a.v1', delayMs: 300 });
    await waitFor(async () => (await effectIds(db, 'plain')).includes(id), {
      timeoutMs: 5_000,
      message: 'the event delivered (the poll is once a minute)',
    });
    const [late] = await lateness();
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(1000);
  });

  it('picks up one from an instance that sends no wake-up within RECHECK_POLLS polls of its time', async () => {
    const relay = await start({ pollIntervalMs: 100 });
    await waitFor(() => relay.app.relay.lastRoundAt !== null, { timeoutMs: 5_000 });
    const silent = await start(undefined, 'off');
    const id = await enqueueIn(silent.app, { eventName: 'test.co.a.v1', delayMs: 200 });
    await waitFor(async () => (await effectIds(db, 'plain')).includes(id), {
      timeoutMs: 10_000,
      message: 'the event delivered by a recheck',
    });
    const [late] = await lateness();
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(RECHECK_POLLS * 100 + 1000);
  });
});
