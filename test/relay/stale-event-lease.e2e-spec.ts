import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { OnOutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { fanOutPendingEvents, heartbeatConsumers, outboxNames } from '../../libs/outbox/src/store/sql';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { expireLeases } from '../support/expire-leases';
import { enqueueIn, TENANT } from '../support/outbox-fixture';

/** The outbox's names in the default schema, which these statements run against. */
const NAMES = outboxNames();
const EVENT = 'test.mixed.v1';

@Injectable()
class LocalConsumers {
  readonly calls: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'local-a' })
  a(_event: unknown, context: OutboxHandlerContext): void {
    this.calls.push(`local-a@${context.attempt}`);
  }

  @OnOutboxEvent(EVENT, { consumer: 'local-b' })
  b(_event: unknown, context: OutboxHandlerContext): void {
    this.calls.push(`local-b@${context.attempt}`);
  }
}

/**
 * An event with in-process consumers hosted here and a consumer hosted by another instance is fanned out at
 * its first claim: the other instance's delivery row is written (the event becomes `processing`) and the
 * in-process pairs are claimed through the event's lease. If the relay dies before recording them, the next
 * claim after the lease takes the event again for those pairs only — the rows its dead relay wrote stay as
 * they are — with the claim count as their attempt.
 */
describe('an event already fanned out whose relay died before recording its in-process pairs', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({ url: db.url, providers: [LocalConsumers] });
    // a consumer only another instance hosts
    const other = heartbeatConsumers(NAMES, randomUUID(), [
      { name: 'remote', eventNames: [EVENT], kind: 'in_process' },
    ]);
    await db.sql(other.text, other.values);
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('is claimed again for its unrecorded pairs alone, once each, as attempt 2', async () => {
    const id = await enqueueIn(t, { eventName: EVENT });
    await t.relay.heartbeat(); // registers the local consumers, as a running relay has
    // the claim of a relay that dies at once: it records nothing, and its lease runs out (made so below)
    const claim = fanOutPendingEvents(NAMES, {
      tenantId: TENANT,
      hosted: ['local-a', 'local-b'],
      inProcess: ['local-a', 'local-b'],
      tenantConsumers: [],
      liveWithinMs: 60_000,
      limit: 10,
      leaseToken: randomUUID(),
      leaseMs: 60_000,
    });
    const [claimed] = await db.sql<{ written: string[]; leases: { pairs: string | null }[] }>(
      claim.text,
      claim.values,
    );
    expect({ written: claimed!.written, pairs: claimed!.leases.map((l) => l.pairs) }).toEqual({
      written: [id],
      pairs: ['local-a local-b'],
    });
    expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: 0, succeeded: 0 });
    expect(await expireLeases(db, [id])).toBe(1);

    const round = await t.relay.runOnce();

    expect(round.succeeded).toBe(2);
    expect(t.app.get(LocalConsumers).calls.sort()).toEqual(['local-a@2', 'local-b@2']);
    expect(
      await db.sql(
        `select consumer_name, status, attempt_count from outbox_deliveries where event_id = $1 order by consumer_name`,
        [id],
      ),
    ).toEqual([
      { consumer_name: 'local-a', status: 'delivered', attempt_count: 2 },
      { consumer_name: 'local-b', status: 'delivered', attempt_count: 2 },
      { consumer_name: 'remote', status: 'pending', attempt_count: 0 },
    ]);
    expect(await db.sql('select status, deliveries_open from event_outbox where id = $1', [id])).toEqual([
      { status: 'processing', deliveries_open: 1 },
    ]);
    expect(await db.sql('select event_id from outbox_event_leases')).toEqual([]);
  });
});
