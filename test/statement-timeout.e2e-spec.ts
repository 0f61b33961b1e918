import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from './support/build-app';
import { relayStatement, RoundTripProbe, type ProbedStatement } from './support/round-trip-probe';
import { waitFor } from './support/wait-for';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { createLoginRole, type TestRole } from './support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  enqueueManyIn,
  recordEffect,
  truncateOutbox,
} from './support/outbox-fixture';

const EVENT = 'test.bounded.v1';

/**
 * Every statement of `sent` that matches `pattern` has the relay's bound (relay.leaseMs, 20 s here) set before it
 * in its round trip: transaction-local (`local`) or for the session (a statement that cannot run in a transaction).
 */
function expectBoundedBefore(
  sent: ProbedStatement[],
  which: (s: ProbedStatement) => boolean,
  local: boolean,
): void {
  const found = sent.filter(which);
  expect(found.length).toBeGreaterThan(0);
  for (const statement of found) {
    const trip = sent.filter((s) => s.trip === statement.trip);
    const bound = trip.findIndex(
      (s) => s.text.includes(`set_config('statement_timeout', $1, ${local})`) && s.values[0] === '20000',
    );
    expect(bound).toBeGreaterThanOrEqual(0);
    expect(bound).toBeLessThan(trip.indexOf(statement));
  }
}

@Injectable()
class Recorder {
  @OnOutboxEvent(EVENT, { consumer: 'recorder' })
  handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

/**
 * Claims made slow on purpose: a trigger sleeps 20 ms per event lease a claim inserts, so a claim's time grows
 * with its batch.
 */
const SLOW_CLAIMS_SQL = [
  EFFECTS_TABLE_SQL,
  `create function test_slow_lease() returns trigger language plpgsql as $$
     begin perform pg_sleep(0.02); return new; end $$`,
  `create trigger test_slow_lease before insert on public.outbox_event_leases
     for each row execute function test_slow_lease()`,
];

describe('a statement_timeout shorter than a claim', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let producer: TestApp;
  let worker: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase(SLOW_CLAIMS_SQL);
    relayRole = await createLoginRole(db, 'outbox_relay', [
      EFFECTS_GRANT,
      // the database's own bound for this role's statements, shorter than a claim of the batches below
      `alter role $ROLE in database ${db.name} set statement_timeout = '200ms'`,
    ]);
    producer = await buildApp({ url: db.url });
  });
  afterEach(async () => {
    await worker?.close();
    worker = undefined;
    await truncateOutbox(db, EFFECTS_TABLE);
  });
  afterAll(async () => {
    await producer?.close();
    await db?.drop();
    await relayRole?.drop();
  });

  const enqueue = (count: number): Promise<string[]> =>
    enqueueManyIn(
      producer,
      Array.from({ length: count }, (_, i) => ({ eventName: EVENT, payload: { i } })),
    );

  const delivered = async (): Promise<number> =>
    (
      await db.sql<{ n: number }>(
        `select count(*)::int as n from outbox_deliveries where status = 'delivered'`,
      )
    )[0]!.n;

  it('does not stop the relay: its own transactions carry their own bound (relay.leaseMs)', async () => {
    worker = await buildApp({
      url: relayRole.url,
      providers: [Recorder],
      outbox: { handlerTimeoutMs: 10_000, relay: { leaseMs: 20_000 } },
    });
    const [row] = await worker.dataSource.query(`select current_setting('statement_timeout') as timeout`);
    expect(row.timeout).toBe('200ms');
    await enqueue(30);
    await worker.relay.drain();
    expect(await delivered()).toBe(30);
    expect(await db.sql('select count(*)::int as n from test_effects')).toEqual([{ n: 30 }]);
  });

  /** A relay under the role's short statement_timeout, with a lease of 20 s: its own bound. */
  const boundedWorker = async (): Promise<TestApp> =>
    (worker = await buildApp({
      url: relayRole.url,
      providers: [Recorder],
      outbox: { handlerTimeoutMs: 10_000, relay: { leaseMs: 20_000, listen: false } },
    }));

  it('bounds its scan for due tenants by relay.leaseMs too, in the same round trip', async () => {
    const bounded = await boundedWorker();
    const probe = RoundTripProbe.attach(bounded.dataSource);
    try {
      await enqueue(3);
      await bounded.relay.drain();
    } finally {
      probe.detach();
    }
    expect(await delivered()).toBe(3);
    expectBoundedBefore(probe.take().statements, relayStatement.dueTenantScan, true);
  });

  it('bounds its registry heartbeat and its lease vacuum by relay.leaseMs too, in the same round trip', async () => {
    const bounded = await boundedWorker();
    const probe = RoundTripProbe.attach(bounded.dataSource);
    try {
      await bounded.relay.heartbeat();
    } finally {
      probe.detach();
    }
    const heartbeat = (s: ProbedStatement): boolean => /insert into \S*outbox_consumers/i.test(s.text);
    expectBoundedBefore(probe.take().statements, heartbeat, true);

    // the lease vacuum needs a role that may vacuum the table (the database's owner), and a batch that releases leases
    const vacuuming = await buildApp({
      url: db.url,
      providers: [Recorder],
      outbox: { handlerTimeoutMs: 10_000, relay: { leaseMs: 20_000, listen: false, vacuumLeasesEvery: 1 } },
    });
    const vacuumProbe = RoundTripProbe.attach(vacuuming.dataSource);
    const seen: ProbedStatement[][] = [];
    const vacuum = (s: ProbedStatement): boolean => /^vacuum /i.test(s.text);
    try {
      await enqueue(3);
      await vacuuming.relay.drain();
      await waitFor(
        () => {
          seen.push(vacuumProbe.take().statements);
          return seen.some((chunk) => chunk.some(vacuum));
        },
        { timeoutMs: 5000, message: 'the lease vacuum' },
      );
    } finally {
      vacuumProbe.detach();
      await vacuuming.close();
    }
    expectBoundedBefore(
      seen.find((chunk) => chunk.some(vacuum))!,
      vacuum,
      false,
    );
  });

  it('shrinks a claim that outlives its own bound, and delivers every event', async () => {
    // a claim of 100 events takes about 2 s here: over the bound of 1 s, which one of 25 stays under
    worker = await buildApp({
      url: relayRole.url,
      providers: [Recorder],
      outbox: { handlerTimeoutMs: 500, relay: { leaseMs: 1000 } },
    });
    await enqueue(100);
    for (let round = 0; round < 20 && (await delivered()) < 100; round++) await worker.relay.drain();
    expect(await delivered()).toBe(100);
    expect(await db.sql('select count(*)::int as n from test_effects')).toEqual([{ n: 100 }]);
  });
});
