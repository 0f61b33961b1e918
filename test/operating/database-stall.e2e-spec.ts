import { Injectable, type LoggerService } from '@nestjs/common';
import { Client, type ClientConfig } from 'pg';
import {
  OnOutboxEvent,
  OutboxRetention,
  OutboxStallError,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { OutboxAdminService, OutboxHealthIndicator } from 'nestjs-pg-outbox/admin';
import { buildApp, type TestApp } from '../support/build-app';
import { FreezingProxy } from '../support/freezing-proxy';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor, within } from '../support/wait-for';
import { enqueueIn, TENANT, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.stall.v1';

@Injectable()
class Recorder {
  readonly seen: string[] = [];
  @OnOutboxEvent(EVENT, { consumer: 'recorder' })
  async record(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    // through the batch's connection, so a batch has a round trip of its own to freeze
    await context.manager.query('select 1');
    this.seen.push(event.eventId);
  }
}

/** Keeps the warnings an app logs. */
class Warnings implements LoggerService {
  readonly lines: string[] = [];
  log(): void {}
  error(message: unknown): void {
    this.lines.push(String(message));
  }
  warn(message: unknown): void {
    this.lines.push(String(message));
  }
  debug(): void {}
  verbose(): void {}
}

/** So long that only a wake-up (or the relay's own look after a stall) can deliver within a test's deadline. */
const NEVER_POLL = 600_000;
/** The relay's lease in these tests: its round trips get no reply within this plus a second, and are given up. */
const LEASE_MS = 2000;
const STALL_MS = LEASE_MS + 1000;

describe('a database that stops answering (a hung host, a partition, a failover)', () => {
  let db: TestDatabase;
  let proxy: FreezingProxy;
  let producer: TestApp;
  let worker: TestApp | undefined;
  let warnings: Warnings;
  const target = (): { host: string; port: number } => {
    const url = new URL(db.url);
    return { host: url.hostname, port: Number(url.port) };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    producer = await buildApp({ url: db.url, outbox: { relay: { wakeUps: 'notify' } } });
  });
  beforeEach(async () => {
    proxy = await FreezingProxy.start(target());
    warnings = new Warnings();
  });
  afterEach(async () => {
    proxy.thaw();
    await worker?.close();
    worker = undefined;
    await proxy.close();
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await producer?.close();
    await db?.drop();
  });

  const startWorker = async (
    relay: Record<string, unknown> = {},
    extra?: Record<string, unknown>,
  ): Promise<TestApp> => {
    worker = await buildApp({
      url: proxy.urlThrough(db.url),
      providers: [Recorder],
      extra,
      logger: warnings,
      // the tenants' webhook subscriptions are read on each round: one of the round trips under test
      webhooks: {},
      outbox: {
        handlerTimeoutMs: 1000,
        relay: { enabled: true, pollIntervalMs: 100, leaseMs: LEASE_MS, wakeUps: 'off', ...relay },
      },
    });
    return worker;
  };
  const seen = (): string[] => worker!.app.get(Recorder).seen;
  const enqueue = (): Promise<string> => enqueueIn(producer, { eventName: EVENT });
  const health = async (): Promise<Record<string, unknown>> =>
    (await within(2000, worker!.app.get(OutboxHealthIndicator).isHealthy('outbox'), 'the health check'))
      .outbox as unknown as Record<string, unknown>;
  const stalled = (roundTrip: string): Promise<string> =>
    waitFor(() => warnings.lines.find((line) => line.includes('no reply') && line.includes(roundTrip)), {
      timeoutMs: STALL_MS + 5000,
      message: `a warning naming the stalled ${roundTrip}`,
    });

  /**
   * Freezes the proxy when the relay sends `pattern`, checks that the relay gives that round trip up with a
   * warning and says so in its health and stats, then lets the database answer again (`recover`) and checks
   * that a new event is delivered within a few seconds, without a restart.
   */
  const survives = async (
    pattern: string,
    roundTrip: string,
    recover: () => void,
    relay: Record<string, unknown> = {},
    extra?: Record<string, unknown>,
  ): Promise<void> => {
    const t = await startWorker(relay, extra);
    const frozen = proxy.freezeOn(pattern);
    const first = await enqueue();
    await within(10_000, frozen, `the relay's ${roundTrip}`);
    const warning = await stalled(roundTrip);
    expect(warning).toContain(`${STALL_MS} ms`);
    expect(t.relay.isRunning).toBe(true);
    const down = await health();
    expect(down).toMatchObject({
      status: 'down',
      relay: 'running',
      stall: { roundTrip, waitedMs: STALL_MS, recoveredAt: null },
      message: expect.stringContaining('no reply'),
    });

    recover();
    const second = await enqueue();
    await waitFor(() => seen().includes(second), {
      timeoutMs: 3 * STALL_MS + 2000,
      message: 'an event enqueued after the database answers again, delivered without a restart',
    });
    await waitFor(() => seen().includes(first), { timeoutMs: 3 * STALL_MS, message: 'the first event' });
    expect(t.relay.isRunning).toBe(true);
    await waitFor(async () => (await health()).status === 'up', {
      timeoutMs: 5000,
      message: 'the health check up again',
    });
    const stats = await t.app.get(OutboxAdminService).stats(TENANT);
    expect(stats.relayStall).toMatchObject({
      roundTrip,
      waitedMs: STALL_MS,
      recoveredAt: expect.any(String),
    });
  };

  it('gives up a claim that gets no reply, and claims again once the database answers', async () => {
    await survives('outbox_claim_new', 'claim', () => proxy.thaw());
  });

  // pg applies the pool's query_timeout to every query: it must not cut the relay's round trips before their
  // deadline (a failed round, no stall reported), TypeORM's START TRANSACTION and COMMIT among them
  it("reports a stalled claim when the pool's query_timeout is shorter than the relay's deadline", async () => {
    await survives('outbox_claim_new', 'claim', () => proxy.thaw(), {}, { query_timeout: 300 });
  });

  it("reports a stalled batch commit when the pool's query_timeout is shorter than the relay's deadline", async () => {
    await survives('outbox_outcome', 'batch', () => proxy.thaw(), {}, { query_timeout: 300 });
  });

  it('gives up a batch whose commit gets no reply, and delivers through a promoted server', async () => {
    await survives('outbox_outcome', 'batch', () => proxy.repoint(target()));
  });

  it('gives up a scan for due tenants that gets no reply', async () => {
    await survives('outbox_due_tenants', 'dueTenantScan', () => proxy.thaw());
  });

  it("gives up a read of a tenant's webhook subscriptions that gets no reply", async () => {
    await survives('outbox_webhook_subscriptions where tenant_id', 'subscriptions', () => proxy.thaw());
  });

  it('gives up a retention purge that gets no reply, and purges again once the database answers', async () => {
    const t = await startWorker();
    const retention = t.app.get(OutboxRetention);
    const frozen = proxy.freezeOn('outbox_purge_settled');
    const purge = retention.purgeNow();
    await within(10_000, frozen, 'the retention purge');
    await expect(within(STALL_MS + 5000, purge, 'the frozen purge')).rejects.toBeInstanceOf(OutboxStallError);
    await stalled('retention');
    // thawing forwards the purge that was held back: the server runs it, and while it holds retention's lock a
    // purge reports 'locked'; one that is not is the database answering retention again
    proxy.thaw();
    const answered = await waitFor(
      async () => {
        const result = await retention.purgeNow();
        return result.skipped === undefined ? result : null;
      },
      { timeoutMs: STALL_MS + 5000, message: 'a purge once the database answers' },
    );
    // one statement for the settled events and one for the expired idempotency keys, both answered
    expect(answered.batches).toBe(2);
  });

  it('notices a wake-up listener whose server stopped answering and listens again where the pool now goes', async () => {
    const t = await startWorker({ pollIntervalMs: NEVER_POLL, wakeUps: 'listen' });
    await waitFor(() => listening(db), { timeoutMs: 5000, message: 'the LISTEN session' });
    const before = await listening(db);
    proxy.freeze();
    await stalled('listen');
    proxy.repoint(target());
    await waitFor(async () => (await listening(db)).some((pid) => !before.includes(pid)), {
      timeoutMs: 3 * STALL_MS,
      message: 'a new LISTEN session',
    });
    const id = await enqueue();
    await waitFor(() => seen().includes(id), {
      timeoutMs: 2 * STALL_MS,
      message: 'an event delivered through the new LISTEN session (the relay never polls here)',
    });
    expect(t.relay.isRunning).toBe(true);
  });
});

describe("the wake-up listener and the pool's Client class", () => {
  let db: TestDatabase;
  let app: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('listens on a connection of the Client class given to the pool (extra.Client), with its options', async () => {
    const made: Client[] = [];
    const configs: ClientConfig[] = [];
    class RecordingClient extends Client {
      constructor(config: ClientConfig) {
        super(config);
        made.push(this);
        configs.push(config);
      }
    }
    app = await buildApp({
      url: db.url,
      providers: [Recorder],
      extra: { Client: RecordingClient, application_name: 'stall-spec' },
      outbox: { relay: { enabled: true, pollIntervalMs: NEVER_POLL, wakeUps: 'listen' } },
    });
    const [pid] = await waitFor(() => listening(db), { timeoutMs: 5000, message: 'the LISTEN session' });
    const pids = made.map((client) => (client as Client & { processID: number | null }).processID);
    expect(pids).toContain(pid);
    const listener = made[pids.indexOf(pid!)]!;
    expect(configs[made.indexOf(listener)]).toMatchObject({ application_name: 'stall-spec' });
  });
});

/** The backend pids of the sessions that LISTEN for the outbox's wake-ups. */
async function listening(db: TestDatabase): Promise<number[]> {
  const rows = await db.sql<{ pid: number }>(
    `select pid from pg_stat_activity where datname = current_database() and query ilike 'listen %'`,
  );
  return rows.map((row) => row.pid);
}
