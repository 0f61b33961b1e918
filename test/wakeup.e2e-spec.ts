import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from './support/build-app';
import { RoundTripProbe } from './support/round-trip-probe';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { waitFor } from './support/wait-for';

const TENANT = '77777777-7777-4777-8777-777777777777';
/** So long that only a wake-up can deliver within a test's deadline. */
const NEVER_POLL = 600_000;

@Injectable()
class Recorder {
  readonly seen: string[] = [];
  @OnOutboxEvent('test.wake.v1', { consumer: 'recorder' })
  record(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }
}

describe('wake-ups', () => {
  let db: TestDatabase;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    while (apps.length) await apps.pop()!.close();
  });
  afterAll(async () => {
    await db?.drop();
  });

  const start = async (relay: Record<string, unknown>): Promise<TestApp> => {
    const app = await buildApp({ url: db.url, providers: [Recorder], outbox: { relay } });
    apps.push(app);
    return app;
  };
  const enqueue = (t: TestApp) =>
    t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId: TENANT, eventName: 'test.wake.v1', payload: {} }),
    );

  it("wakes this process's relay right after the enqueuing transaction commits, not at the next poll", async () => {
    const t = await start({ enabled: true, pollIntervalMs: NEVER_POLL, listen: false, notify: false });
    const id = await enqueue(t);
    await waitFor(() => t.app.get(Recorder).seen.includes(id), {
      timeoutMs: 5000,
      message: 'the in-process wake-up',
    });
  });

  it('claims a lone event once: after a short batch the relay waits for the next wake-up instead of going round again', async () => {
    const t = await start({ enabled: true, pollIntervalMs: NEVER_POLL, listen: false, notify: false });
    // every claim the relay sends (the fan-out, named or not) and every scan for due tenants
    const probe = RoundTripProbe.attach(t.dataSource);
    const id = await enqueue(t);
    await waitFor(
      async () =>
        (await db.sql<{ status: string }>('select status from event_outbox where id = $1', [id]))[0]
          ?.status === 'published',
      { timeoutMs: 5000, message: 'the event delivered through the in-process wake-up' },
    );
    // waits for whatever round is still in flight (a second round would have begun before the batch committed)
    await t.relay.stop();
    expect(t.app.get(Recorder).seen).toEqual([id]);
    const seen = probe.take().statements;
    const sent = {
      claims: seen.filter((s) => s.text.includes('with fresh as') && s.values[0] === TENANT).length,
      scans: seen.filter((s) => s.text.includes('outbox_due_tenants(')).length,
    };
    expect(sent).toEqual({ claims: 1, scans: 1 });
  });

  it('wakes the relay of another process through LISTEN/NOTIFY, and again after its listening connection is killed', async () => {
    const producer = await start({ enabled: false, notify: true });
    const worker = await start({ enabled: true, pollIntervalMs: NEVER_POLL, listen: true });
    const seen = worker.app.get(Recorder).seen;
    const first = await enqueue(producer);
    await waitFor(() => seen.includes(first), { timeoutMs: 5000, message: 'the NOTIFY wake-up' });

    const killed = await db.sql<{ ok: boolean }>(
      `select pg_terminate_backend(pid) ok from pg_stat_activity where query = 'listen outbox_wakeup' and datname = current_database()`,
    );
    expect(killed.length).toBeGreaterThan(0);
    // The listener reconnects by itself; keep enqueueing until a wake-up gets through.
    const later: string[] = [];
    await waitFor(
      async () => {
        later.push(await enqueue(producer));
        return later.some((id) => seen.includes(id));
      },
      { timeoutMs: 10_000, intervalMs: 200, message: 'a wake-up after the listener reconnected' },
    );
  });

  it('notifies at once after a quiet spell, and once per relay.notifyGapMs for the commits within it', async () => {
    const producer = await start({ enabled: false, notify: true, notifyGapMs: 600_000 });
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    try {
      const received: string[] = [];
      listener.on('notification', (n) => received.push(n.payload ?? ''));
      await listener.query('listen outbox_wakeup');
      const marker = async (name: string): Promise<void> => {
        await db.sql(`select pg_notify('outbox_wakeup', $1)`, [name]);
        await waitFor(() => received.includes(name), { timeoutMs: 5000, message: `the ${name} marker` });
      };

      await enqueue(producer);
      await waitFor(() => received.includes(TENANT), { timeoutMs: 5000, message: 'the first NOTIFY' });
      // Two more commits within the gap. A notification of theirs, sent when they committed, would be delivered
      // before the marker sent after them (one channel, one server: delivered in commit order).
      await enqueue(producer);
      await enqueue(producer);
      await marker('after-the-burst');
      expect(received).toEqual([TENANT, 'after-the-burst']);
    } finally {
      await listener.end();
    }
  });

  it('refuses a negative relay.notifyGapMs at boot, saying what it takes', async () => {
    await expect(start({ enabled: false, notifyGapMs: -1 })).rejects.toThrow(
      /relay\.notifyGapMs.*an integer number of ms ≥ 0/s,
    );
  });

  it('still delivers by polling when no notification arrives', async () => {
    const t = await start({ enabled: true, pollIntervalMs: 200, listen: false, notify: false });
    // Written behind the library's back: no wake-up of any kind is sent.
    const [{ id }] = (await db.sql<{ id: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, 'test.wake.v1', '{}') returning id`,
      [TENANT],
    )) as [{ id: string }];
    await waitFor(() => t.app.get(Recorder).seen.includes(id), {
      timeoutMs: 5000,
      message: 'the poll to find the event',
    });
  });
});
