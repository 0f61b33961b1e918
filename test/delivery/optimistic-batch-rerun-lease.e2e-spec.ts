import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueManyIn, recordEffect, truncateOutbox } from '../support/outbox-fixture';

/*
 * ADR 1001: before a rerun, every event of the batch gets its lease extended to a full relay.leaseMs (a slow first
 * run may have used it up); a second relay's round during the rerun claims none of them.
 */

const FIRST = 'test.optimistic.lease.first.v1';
const FAILER = 'test.optimistic.lease.failer.v1';
const LATER = 'test.optimistic.lease.later.v1';

let db: TestDatabase;
/** Seconds of lease left per event, as the rerun's third handler saw them. */
let seen: { event_id: string; left: number }[] | null = null;
/** A second relay (another app on the same database), run once from inside the rerun. */
let second: TestApp | null = null;
let secondRound: unknown = null;
let expired = false;
const calls: string[] = [];

@Injectable()
class Handlers {
  @OnOutboxEvent(FIRST, { consumer: 'first' })
  async first(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
  }

  @OnOutboxEvent(FAILER, { consumer: 'failer', maxAttempts: 3 })
  async failer(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    calls.push('failer');
    await recordEffect(event, context);
    if (expired) throw new Error('failer refuses');
    expired = true;
    // the first run took the whole lease (what a slow first run does; no waiting for the clock here)
    await db.sql(`update public.outbox_event_leases set lease_expires_at = now() - interval '1 second'`);
    throw new Error('failer refuses');
  }

  @OnOutboxEvent(LATER, { consumer: 'later' })
  async later(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    calls.push('later');
    if (seen !== null) return recordEffect(event, context);
    seen = await db.sql<{ event_id: string; left: number }>(
      `select event_id, extract(epoch from lease_expires_at - now())::float8 as left
         from public.outbox_event_leases order by event_id`,
    );
    if (second) secondRound = await second.relay.runOnce();
    await recordEffect(event, context);
  }
}

describe('the rerun after a handler failed having written (optimistic, the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({
      url: db.url,
      providers: [Handlers],
      imports: [PolicySwitches.of({ optimisticBatches: true })],
    });
  });
  afterAll(async () => {
    await second?.close();
    await truncateOutbox(db);
    await t?.close();
    await db?.drop();
  });

  it('runs with every event of the batch leased for a full relay.leaseMs, and commits', async () => {
    await enqueueManyIn(t, [
      { eventName: FIRST, payload: {} },
      { eventName: FAILER, payload: {} },
      { eventName: LATER, payload: {} },
    ]);
    // a second relay on the same database runs a round from inside the rerun: it finds every lease held
    second = await buildApp({ url: db.url, providers: [Handlers] });
    const round = await t.relay.runOnce();
    expect(seen).not.toBeNull();
    // relay.leaseMs is 60 s: every event's lease has most of it left in the rerun
    for (const lease of seen!)
      expect({ event: lease.event_id, ok: lease.left > 30 }).toEqual({ event: lease.event_id, ok: true });
    expect(round).toMatchObject({ eventsClaimed: 3, succeeded: 2, failed: 1, leaseLost: 0 });
    expect(secondRound).toMatchObject({ eventsClaimed: 0 });
    // each effect once: the failer's none
    expect(
      await db.sql(`select consumer, count(*)::int as n from test_effects group by 1 order by 1`),
    ).toEqual([
      { consumer: 'first', n: 1 },
      { consumer: 'later', n: 1 },
    ]);
  });
});
