import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  effects,
  enqueueIn,
  recordEffect,
  truncateOutbox,
} from '../support/outbox-fixture';
import { startChildRelay } from '../support/child-relay';
import { expireLeases } from '../support/expire-leases';
import { waitFor } from '../support/wait-for';

const LEASE_MS = 1500;

@Injectable()
class VictimConsumer {
  @OnOutboxEvent('test.crash.v1', { consumer: 'victim', maxAttempts: 2 })
  handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

describe('crash recovery', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL]);
    t = await buildApp({
      url: db.url,
      providers: [VictimConsumer],
      outbox: { handlerTimeoutMs: LEASE_MS - 500, relay: { leaseMs: LEASE_MS } },
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  beforeEach(() => truncateOutbox(db, EFFECTS_TABLE));

  const enqueue = (payload: Record<string, unknown>) => enqueueIn(t, { eventName: 'test.crash.v1', payload });

  it('refuses the late outcome of a relay paused past its lease, and the effect happens once', async () => {
    const child = await startChildRelay({
      DATABASE_URL: db.url,
      LEASE_MS: String(LEASE_MS),
      MAX_ATTEMPTS: '2',
    });
    try {
      const id = await enqueue({ mode: 'pause' });
      await child.line(`HANDLER_STARTED ${id}`);
      child.signal('SIGSTOP');
      // The paused relay holds its batch transaction open; PostgreSQL ends its idle session after the lease,
      // then the lease expires and this relay takes the delivery over.
      await waitFor(async () => (await t.relay.runOnce()).succeeded === 1, {
        timeoutMs: 15_000,
        message: 'the takeover',
      });
      child.signal('SIGCONT');
      await child.line(`HANDLER_RETURNED ${id}`);
      // The paused relay wakes up, finds its connection gone and its lease taken: its outcome must not land.
      await child.line('RELAY_ERROR');
      expect(await effects(db)).toEqual([{ event_id: id, consumer: 'victim', attempt: 2 }]);
      expect(await db.sql('select status, attempt_count from outbox_deliveries')).toEqual([
        { status: 'delivered', attempt_count: 2 },
      ]);
      expect(await db.sql('select consumer_name from consumer_inbox')).toEqual([{ consumer_name: 'victim' }]);
    } finally {
      child.signal('SIGCONT');
      await child.kill('SIGKILL');
    }
  });

  it('dead-letters an event whose handler keeps crashing the process, instead of crash-looping', async () => {
    const id = await enqueue({ mode: 'poison' });
    let crashes = 0;
    // Each child claims the event, starts the handler, and dies; the attempt was counted at claim time. Its
    // lease is long: the next claim comes once the test has ended it (by SQL, not by waiting for it).
    for (;;) {
      // The in-process pair has no delivery row until an outcome is recorded: the claims are counted on the
      // event's lease.
      const [row] = await db.sql<{ claim_count: number }>(
        'select claim_count from outbox_event_leases where event_id = $1',
        [id],
      );
      if ((row?.claim_count ?? 0) >= 2) break;
      const child = await startChildRelay(
        { DATABASE_URL: db.url, LEASE_MS: '60000', MAX_ATTEMPTS: '2' },
        { waitReady: false },
      );
      await child.exited;
      crashes++;
      expect(await expireLeases(db, [id])).toBe(1);
      expect(crashes).toBeLessThanOrEqual(3);
    }
    expect(crashes).toBe(2);
    // The third claim (by this relay, the lease ended) sees two attempts that never finished.
    expect(await t.relay.runOnce()).toMatchObject({ dead: 1 });
    const [delivery] = await db.sql(
      'select status, error_code, last_error from outbox_deliveries where event_id = $1',
      [id],
    );
    expect(delivery).toMatchObject({ status: 'dead', error_code: 'staleLeaseRecovered' });
    expect((delivery as { last_error: string }).last_error).toContain('poison');
    expect(await db.sql('select status from event_outbox where id = $1', [id])).toEqual([
      { status: 'failed' },
    ]);
    expect(await effects(db)).toEqual([]);
  });
});
