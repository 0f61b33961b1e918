import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import type { OutboxRelayOptions } from 'nestjs-pg-outbox';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';
import { enqueueIn, eventRow, TENANT, TENANTS } from '../support/outbox-fixture';
import {
  insertEvent,
  insertEvents,
  insertScheduledEvent,
  insertScheduledEvents,
  outboxNames,
  type EventRow,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';

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

  /** An app with these relay options, and these switches over its relay's policy (e.g. the pacer's gap). */
  const start = async (relay: OutboxRelayOptions, switches: Partial<RelayPolicy> = {}): Promise<TestApp> => {
    const app = await buildApp({
      url: db.url,
      providers: [Recorder],
      imports: [PolicySwitches.of(switches)],
      outbox: { relay },
    });
    apps.push(app);
    return app;
  };
  const enqueue = (t: TestApp) => enqueueIn(t, { eventName: 'test.wake.v1' });

  it("wakes this process's relay right after the enqueuing transaction commits, not at the next poll", async () => {
    const t = await start({ enabled: true, pollIntervalMs: NEVER_POLL, wakeUps: 'off' });
    const id = await enqueue(t);
    await waitFor(() => t.app.get(Recorder).seen.includes(id), {
      timeoutMs: 5000,
      message: 'the in-process wake-up',
    });
  });

  it('wakes the relay of another process through LISTEN/NOTIFY, and again after its listening connection is killed', async () => {
    const producer = await start({ enabled: false, wakeUps: 'notify' });
    const worker = await start({ enabled: true, pollIntervalMs: NEVER_POLL, wakeUps: 'listen' });
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

  /**
   * A client LISTENing for wake-ups, with the payloads it received, and `marker`: a notification of its own, sent
   * after what a test did and awaited. A wake-up due before it would be delivered before it (one channel, one
   * server: delivered in commit order).
   */
  const listening = async () => {
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    const received: string[] = [];
    listener.on('notification', (n) => received.push(n.payload ?? ''));
    await listener.query('listen outbox_wakeup');
    const marker = async (name: string): Promise<void> => {
      await db.sql(`select pg_notify('outbox_wakeup', $1)`, [name]);
      await waitFor(() => received.includes(name), { timeoutMs: 5000, message: `the ${name} marker` });
    };
    return { received, marker, end: () => listener.end() };
  };

  it('notifies at once after a quiet spell, and once per gap of the pacer for the commits within it', async () => {
    const producer = await start({ enabled: false, wakeUps: 'notify' }, { wakeUpGapMs: 600_000 });
    const listener = await listening();
    try {
      await enqueue(producer);
      await waitFor(() => listener.received.includes(TENANT), {
        timeoutMs: 5000,
        message: 'the first NOTIFY',
      });
      // two more commits within the gap: no wake-up of theirs before the marker
      await enqueue(producer);
      await enqueue(producer);
      await listener.marker('after-the-burst');
      expect(listener.received).toEqual([TENANT, 'after-the-burst']);
    } finally {
      await listener.end();
    }
  });

  it("carries the wake-up in the insert, delivered with its commit: enqueueMany's naming its tenants, a delayed event's naming none", async () => {
    const listener = await listening();
    try {
      // a gap so long that nothing but the first insert of each app can wake the relays within the test
      const many = await start({ enabled: false, wakeUps: 'notify' }, { wakeUpGapMs: 600_000 });
      await many.dataSource.transaction(async (manager) => {
        await many.outbox.enqueueMany(manager, [
          { tenantId: TENANTS[0], eventName: 'test.wake.v1', payload: {} },
          { tenantId: TENANTS[1], eventName: 'test.wake.v1', payload: {} },
        ]);
        await listener.marker('before-the-commit');
      });
      const delayed = await start({ enabled: false, wakeUps: 'notify' }, { wakeUpGapMs: 600_000 });
      await delayed.dataSource.transaction((manager) =>
        delayed.outbox.enqueue(manager, {
          tenantId: TENANTS[2],
          eventName: 'test.wake.v1',
          payload: {},
          delayMs: 60_000,
        }),
      );
      await listener.marker('after-the-commits');
      // nothing before its transaction committed; a pooled NOTIFY would wait 600 s
      expect(listener.received).toEqual([
        'before-the-commit',
        `${TENANTS[0]},${TENANTS[1]}`,
        '',
        'after-the-commits',
      ]);
    } finally {
      await listener.end();
    }
  });

  it('a carrying insert answers as the plain one (no row, its rows counted), runs its pg_notify once however many rows it writes, and a rollback drops it', async () => {
    // ids 0192a000-0000-7000-8000-0000000000ii, the tenants in turn
    const row = (i: number, extra: Partial<EventRow> = {}): EventRow =>
      eventRow(i, 'test.wake.v1', { tenantId: TENANTS[i % TENANTS.length]!, ...extra });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const n = outboxNames();
    // every form of enqueue's insert, each carrying a wake-up of its own payload
    const carriers: [string, number, SqlStatement][] = [
      ['one', 1, insertEvent(n, row(1), 'one')],
      ['one traced', 1, insertEvent(n, row(2, { traceparent }), 'one traced')],
      ['many', 3, insertEvents(n, [row(3), row(4), row(5)], 'many')],
      ['many traced', 2, insertEvents(n, [row(6, { traceparent }), row(7)], 'many traced')],
      ['one delayed', 1, insertScheduledEvent(n, row(8, { delayMs: 60_000 }), 'one delayed')],
      [
        'many delayed',
        3,
        insertScheduledEvents(
          n,
          [row(9), row(10, { delayMs: 60_000 }), row(11, { traceparent })],
          'many delayed',
        ),
      ],
    ];
    const listener = await listening();
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      for (const [payload, rows, carrier] of carriers) {
        // run once in a transaction rolled back: its pg_notify ran once, not once per row (PostgreSQL would fold
        // equal notifications of a transaction into one: the plan counts the calls; `1.00` from PostgreSQL 18 on),
        // and nothing is delivered
        await client.query('begin');
        const plan = await client.query<{ 'QUERY PLAN': string }>(
          `explain (analyze, costs off, timing off, summary off) ${carrier.text}`,
          carrier.values,
        );
        await client.query('rollback');
        expect([payload, plan.rows.map((r) => r['QUERY PLAN']).join('\n')]).toEqual([
          payload,
          expect.stringMatching(/CTE wake\n\s*->\s+Result \(actual rows=1(\.00)? loops=1\)/),
        ]);
        // and committed: an insert's answer, no row description and no row (not a `select pg_notify(…)`'s row)
        await client.query('begin');
        const result = await client.query(carrier.text, carrier.values);
        await client.query('commit');
        expect([payload, result.command, result.rowCount, result.fields, result.rows]).toEqual([
          payload,
          'INSERT',
          rows,
          [],
          [],
        ]);
      }
      // delivered with each commit, once, and nothing for the rolled back runs
      await listener.marker('after-the-commits');
      expect(listener.received).toEqual([...carriers.map(([payload]) => payload), 'after-the-commits']);
      expect(
        await db.sql<{ n: number }>(
          `select count(*)::int as n from event_outbox where id::text like '0192a000-0000-7000-8000-0000000000%'`,
        ),
      ).toEqual([{ n: carriers.reduce((sum, [, rows]) => sum + rows, 0) }]);
    } finally {
      await client.end();
      await listener.end();
    }
  });

  it('wakes the relays after a commit, and not for a rollback', async () => {
    const producer = await start({ enabled: false, wakeUps: 'notify' }, { wakeUpGapMs: 50 });
    const listener = await listening();
    try {
      // (relay-statements pins that it goes on a connection of its own, after the commit)
      await enqueue(producer);
      await waitFor(() => listener.received.includes(TENANT), { timeoutMs: 5000, message: 'the wake-up' });

      const quiet = Date.now() + 60;
      await waitFor(() => Date.now() >= quiet, {
        timeoutMs: 5000,
        message: 'a quiet spell longer than the gap',
      });
      await expect(
        producer.dataSource.transaction(async (manager) => {
          await producer.outbox.enqueue(manager, {
            tenantId: TENANTS[1],
            eventName: 'test.wake.v1',
            payload: {},
          });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      await listener.marker('after-the-rollback');
      expect(listener.received).toEqual([TENANT, 'after-the-rollback']);
    } finally {
      await listener.end();
    }
  });

  it('wakes the relays for a commit whose savepoint rolled back, naming the tenants of what it kept', async () => {
    const producer = await start({ enabled: false, wakeUps: 'notify' }, { wakeUpGapMs: 50 });
    const listener = await listening();
    try {
      await producer.dataSource.transaction(async (manager) => {
        await producer.outbox.enqueue(manager, {
          tenantId: TENANTS[0],
          eventName: 'test.wake.v1',
          payload: {},
        });
        // the nested transaction is a savepoint, rolled back after its own enqueue
        await manager
          .transaction(async (inner) => {
            await producer.outbox.enqueue(inner, {
              tenantId: TENANTS[1],
              eventName: 'test.wake.v1',
              payload: {},
            });
            throw new Error('savepoint rolled back');
          })
          .catch(() => undefined);
      });
      await waitFor(() => listener.received.some((p) => p.split(',').includes(TENANTS[0])), {
        timeoutMs: 5000,
        message: 'a wake-up naming the tenant of the kept event',
      });
    } finally {
      await listener.end();
    }
  });

  it("sends as relay.wakeUps says: 'auto' only from an instance whose relay is off, 'both' from any", async () => {
    const listener = await listening();
    try {
      const relaying = await start({ enabled: true, pollIntervalMs: NEVER_POLL });
      await enqueue(relaying);
      await listener.marker('after-auto-with-a-relay');
      const off = await start({ enabled: false, wakeUps: 'off' });
      await enqueue(off);
      await listener.marker('after-off');
      expect(listener.received).toEqual(['after-auto-with-a-relay', 'after-off']);

      const enqueuing = await start({ enabled: false });
      await enqueue(enqueuing);
      await waitFor(() => listener.received.includes(TENANT), {
        timeoutMs: 5000,
        message: "'auto' notifying",
      });
      const both = await start({ enabled: true, pollIntervalMs: NEVER_POLL, wakeUps: 'both' });
      await enqueue(both);
      await waitFor(() => listener.received.filter((p) => p === TENANT).length === 2, {
        timeoutMs: 5000,
        message: "'both' notifying",
      });
    } finally {
      await listener.end();
    }
  });

  it('refuses the options that relay.wakeUps replaced, and a wakeUps it does not know, at boot', async () => {
    for (const [old, value] of [
      ['notify', true],
      ['listen', false],
      ['notifyGapMs', 2],
    ] as const) {
      await expect(start({ enabled: false, [old]: value } as OutboxRelayOptions)).rejects.toThrow(
        new RegExp(`option relay\\.${old} is now relay\\.wakeUps`),
      );
    }
    await expect(
      start({ enabled: false, wakeUps: 'always' } as unknown as OutboxRelayOptions),
    ).rejects.toThrow(
      /option relay\.wakeUps must be one of 'auto', 'listen', 'notify', 'both', 'off', got "always"/,
    );
  });

  it('still delivers by polling when no notification arrives', async () => {
    const t = await start({ enabled: true, pollIntervalMs: 200, wakeUps: 'off' });
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
