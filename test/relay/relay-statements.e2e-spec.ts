import { Injectable } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AbstractLogger, type LogLevel, type LogMessage } from 'typeorm';
import { OnOutboxEvent, OutboxService, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import type { OutboxWebhooksModuleOptions } from 'nestjs-pg-outbox/webhooks';
import { buildApp, type BuildAppOptions, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { relayStatement, RoundTripProbe, type ProbedStatement } from '../support/round-trip-probe';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait-for';
import { enqueueIn, enqueueManyIn, TENANT, TENANTS, truncateOutbox } from '../support/outbox-fixture';

/*
 * The one spec that pins the statements the outbox sends and the round trips they travel in: a batch's, round
 * trip by round trip, for each kind of consumer; which claim a round sends; enqueue's insert; the named
 * statements; the bounds set before a statement; the wake-ups. The other specs assert what was delivered and
 * recorded, so that a change in how statements are packed into round trips edits this file alone.
 */

/** Throws the message its event carries: the relay records it as the delivery's last error. */
@Injectable()
class Thrower {
  @OnOutboxEvent('test.throw.v1', { consumer: 'thrower', maxAttempts: 5 })
  handle(event: OutboxEvent<{ message: string }>): void {
    throw new Error(event.data.message);
  }
}

/** Sleeps in the database, through the batch transaction: its first query travels with the savepoint. */
@Injectable()
class Sleeper {
  @OnOutboxEvent('test.sleep.v1', { consumer: 'sleeper' })
  async handle(_event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select pg_sleep(0.05)');
  }
}

/** Keeps what TypeORM's slow-query log is told. */
class SlowQueries extends AbstractLogger {
  readonly slow: { time: number; query: string }[] = [];

  override logQuerySlow(time: number, query: string): void {
    this.slow.push({ time, query });
  }

  protected writeLog(_level: LogLevel, _message: LogMessage | LogMessage[]): void {}
}

const PLAIN = 'test.plain.v1';
const WRITTEN = 'test.written.v1';
const WRITTEN_FAILS = 'test.written-fails.v1';
const CHAIN = 'test.chain.v1';
const FOLLOW_UP = 'test.chain.follow-up.v1';
const HOOKED = 'test.hooked.v1';
/** Values of every kind a handler's first query may hold, a Buffer (sent in binary) among them. */
const FIRST_VALUES = [
  String.raw`it's "quoted" \ $1 -- ünï 𝄞`,
  -42,
  1.5,
  false,
  ['a', null],
  Buffer.from([0, 39, 255]),
];

/**
 * The consumers of the batches below: `plain` never asks for `context.manager`; `writer-a` and `writer-b` write
 * through it (the first query of `writer-a` holds values of every kind, then it sends a second one); `chainer`
 * enqueues a follow-up in its batch.
 */
@Injectable()
class Consumers {
  readonly seen: string[] = [];

  constructor(private readonly outbox: OutboxService) {}

  @OnOutboxEvent(PLAIN, { consumer: 'plain' })
  plain(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }

  @OnOutboxEvent(WRITTEN, { consumer: 'writer-a' })
  async writerA(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query(
      'select $1::text, $2::int, $3::float8, $4::bool, $5::text[], $6::bytea',
      FIRST_VALUES,
    );
    await context.manager.query('select $1::uuid', [event.eventId]);
  }

  @OnOutboxEvent(WRITTEN, { consumer: 'writer-b' })
  async writerB(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select $1::uuid', [event.eventId]);
  }

  @OnOutboxEvent(WRITTEN_FAILS, { consumer: 'fails-after-writing' })
  async failsAfterWriting(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select $1::uuid', [event.eventId]);
    throw new Error('fails after writing');
  }

  @OnOutboxEvent(WRITTEN_FAILS, { consumer: 'steady-writer' })
  async steadyWriter(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select $1::uuid', [event.eventId]);
  }

  @OnOutboxEvent(CHAIN, { consumer: 'chainer' })
  async chain(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await this.outbox.enqueue(context.manager, {
      tenantId: event.tenantId,
      eventName: FOLLOW_UP,
      payload: { after: event.eventId },
    });
  }

  @OnOutboxEvent(FOLLOW_UP, { consumer: 'followed' })
  followed(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }
}

const isInsert = (s: ProbedStatement): boolean => /^\s*insert into public\.event_outbox/i.test(s.text);
/** `enqueue`'s insert carrying a wake-up: `with wake as materialized (select pg_notify(…)) insert …`. */
const isCarryingInsert = (s: ProbedStatement): boolean =>
  /^with wake as materialized \(select pg_notify\([^)]*\)\)\s+insert into public\.event_outbox/i.test(s.text);

/** What a statement is, in a word: the relay's own by what they do, anything else by its text. */
function label(s: ProbedStatement): string {
  const text = s.text.replace(/\s+/g, ' ').trim();
  if (relayStatement.dueTenantScan(s)) return 'due tenants';
  if (relayStatement.scanClock(s)) return 'scan clock';
  if (relayStatement.fanOut(s)) return 'fan-out';
  if (relayStatement.claim(s)) return 'lean claim';
  if (relayStatement.handlerContext(s)) return 'handler context';
  if (/^with o as \(/.test(text)) return 'outcome';
  if (/^with retry as \(/.test(text)) return 'claim retries';
  // the relay's own transactions also turn JIT off (relayBound)
  if (
    /^select set_config\('statement_timeout', \$1, (true|false)\)(, set_config\('jit', 'off', true\))?$/.test(
      text,
    )
  )
    return 'bound';
  if (/^select concat\(set_config\(\$1, \$2, true\), set_config\('idle_in_transaction/.test(text))
    return 'context';
  if (text.startsWith("select set_config('outbox.expected_batch'")) return 'expect batch';
  if (text.startsWith('do $outbox_guard$')) return 'guard';
  if (/^insert into \S*outbox_batch_seals/.test(text)) return 'seal';
  if (/^update \S*outbox_event_leases set lease_expires_at/.test(text)) return 'extend event leases';
  if (/^delete from \S*outbox_batch_seals/.test(text)) return 'unseal';
  if (/^with c as \(.*outbox_consumers/.test(text)) return 'heartbeat';
  if (/^select \* from \S*outbox_webhook_subscriptions/.test(text)) return 'subscriptions';
  if (isInsert(s)) return 'insert';
  return text;
}

/** The statements sent, in a word each, round trip by round trip. */
function trips(sent: readonly ProbedStatement[]): string[][] {
  const byTrip = new Map<number, string[]>();
  for (const s of sent) byTrip.set(s.trip, [...(byTrip.get(s.trip) ?? []), label(s)]);
  return [...byTrip.values()];
}

/** What `work` sends on an app built with `options` (its consumers: `Consumers`), since `probe.take()` if it called it. */
async function sentBy(
  options: BuildAppOptions,
  work: (t: TestApp, probe: RoundTripProbe) => Promise<void>,
): Promise<ProbedStatement[]> {
  const t = await buildApp({ providers: [Consumers], ...options });
  const probe = RoundTripProbe.attach(t.dataSource);
  try {
    await work(t, probe);
    // not those of closing the app
    return probe.take().statements;
  } finally {
    probe.detach();
    await t.close();
  }
}

describe('relay statements sent in one round trip', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({ url: db.url, providers: [Thrower] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it.each([
    ['quotes', `it's "quoted"`],
    ['backslashes', String.raw`C:\temp\new \' \\`],
    ['SQL in the text', `'); drop table event_outbox; -- $1 $2 /* */ $$ ;commit;`],
    ['unicode', 'ünïcødé ✓ 𝄞 — 北京'],
    ['a parameter marker', '$1'],
  ])('records an error with %s exactly as thrown', async (_, message) => {
    const id = await enqueueIn(t, { eventName: 'test.throw.v1', payload: { message } });
    const round = await t.relay.runOnce();
    expect(round.failed).toBe(1);
    const [row] = await db.sql<{ last_error: string; error_code: string }>(
      'select last_error, error_code from outbox_deliveries where event_id = $1',
      [id],
    );
    expect(row).toEqual({ last_error: `Error: ${message}`, error_code: 'handlerError' });
    expect(await db.sql('select count(*)::int as n from event_outbox')).not.toEqual([{ n: 0 }]);
  });

  it('sends every value as a bound parameter, never in the text of a statement', async () => {
    const probe = RoundTripProbe.attach(t.dataSource);
    const message = `'); select 'injected' -- ${'x'.repeat(8)}`;
    await enqueueIn(t, { eventName: 'test.throw.v1', payload: { message } });
    expect((await t.relay.runOnce()).failed).toBe(1);
    probe.detach();
    const sent = probe.take().statements;
    expect(sent.some((s) => s.values.some((v) => Array.isArray(v) && v.includes(`Error: ${message}`)))).toBe(
      true,
    );
    expect(sent.filter((s) => s.text.includes(message) || s.text.includes(TENANT))).toEqual([]);
  });
});

describe('statements sent in one round trip and TypeORM options', () => {
  let db: TestDatabase;
  let t: TestApp;
  const logger = new SlowQueries();
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({
      url: db.url,
      typeorm: false,
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url, maxQueryExecutionTime: 20, logger })],
      providers: [Sleeper],
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it("reports a handler's slow first query to the slow-query log, as TypeORM's own query() does", async () => {
    await enqueueIn(t, { eventName: 'test.sleep.v1' });
    expect((await t.relay.runOnce()).succeeded).toBe(1);
    const sleeps = logger.slow.filter((s) => s.query.includes('pg_sleep'));
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]!.time).toBeGreaterThan(20);
    // shown as written: TypeORM's own query() sent it, right after the savepoint that went with it
    expect(sleeps[0]!.query).toBe('select pg_sleep(0.05)');
  });
});

/**
 * A batch's statements, round trip by round trip, in a fresh app's second round (its first registered its
 * consumers and loaded what it caches): the scan for due tenants, the claim and the batch transaction's start,
 * the handlers' statements, the closing.
 */
describe("a batch's statements and round trips, for each kind of consumer", () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startWebhookReceiver();
  });
  afterEach(async () => {
    await truncateOutbox(db);
    await db.sql(`delete from outbox_consumers where name = 'elsewhere'`);
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.drop();
  });

  /** The app's second round, of two events of `eventName`: what it did, and its statements round trip by round trip. */
  async function secondRound(eventName: string, webhooks?: OutboxWebhooksModuleOptions, firstFailed = 0) {
    let round: unknown;
    // no wake-up NOTIFY: it goes on the pool after the producer's commit, not in the relay's round trips
    const outbox = { relay: { wakeUps: 'off' as const } };
    const statements = await sentBy({ url: db.url, webhooks, outbox }, async (t, probe) => {
      await enqueueIn(t, { eventName });
      expect((await t.relay.runOnce()).failed).toBe(firstFailed);
      await enqueueManyIn(t, [{ eventName }, { eventName }]);
      probe.take();
      round = await t.relay.runOnce();
    });
    // one list per round trip: their number is the round's round trips
    return { round, trips: trips(statements), statements };
  }

  const SCAN = ['begin', 'bound', 'due tenants', 'scan clock', 'commit'];

  it('in-process consumers that never ask for context.manager: the lean claim, then the unguarded closing', async () => {
    const { round, trips } = await secondRound(PLAIN);
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 2 });
    expect(trips).toEqual([
      SCAN,
      ['begin', 'context', 'lean claim', 'commit; START TRANSACTION'],
      ['context', 'outcome', 'COMMIT'],
    ]);
  });

  const FIRST = 'select $1::text, $2::int, $3::float8, $4::bool, $5::text[], $6::bytea';
  const SECOND = 'select $1::uuid';

  it("in-process consumers writing through context.manager: the batch's context and bound once, the handlers' queries alone, the guarded closing", async () => {
    const { round, trips, statements } = await secondRound(WRITTEN);
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 4 });
    expect(trips).toEqual([
      SCAN,
      ['begin', 'context', 'lean claim', 'commit; START TRANSACTION'],
      ['context', 'seal', 'bound', FIRST],
      [SECOND],
      [SECOND],
      [FIRST],
      [SECOND],
      [SECOND],
      ['expect batch', 'guard', 'unseal', 'context', 'outcome', 'COMMIT'],
    ]);
    // the first query's values bound as the driver was given them, binary ones included
    for (const first of statements.filter((s) => s.text === FIRST))
      expect(first.values).toEqual(FIRST_VALUES);
  });

  it("a writing handler that fails: the batch rolled back, its leases extended, and run again with each handler's first query in its savepoint", async () => {
    const { round, trips } = await secondRound(WRITTEN_FAILS, undefined, 1);
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 2, failed: 2 });
    const WRITE = 'select $1::uuid';
    expect(trips).toEqual([
      SCAN,
      ['begin', 'context', 'lean claim', 'commit; START TRANSACTION'],
      // e1: fails first, then steady; the optimistic run stops at the failure
      ['context', 'seal', 'bound', WRITE],
      ['ROLLBACK'],
      ['begin', 'context', 'extend event leases', 'commit'],
      ['START TRANSACTION'],
      // e1's failure kept: its handler is not called again
      ['context', 'seal', 'handler context', 'savepoint outbox_h1', WRITE],
      ['handler context', 'release savepoint outbox_h1; savepoint outbox_h2', WRITE],
      ['rollback to savepoint outbox_h2; release savepoint outbox_h2'],
      ['handler context', 'savepoint outbox_h3', WRITE],
      ['expect batch', 'guard', 'unseal', 'context', 'outcome', 'COMMIT'],
    ]);
  });

  it('consumers of another instance too: the fan-out, and the claim of the pairs due', async () => {
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('elsewhere', $1, now())`,
      [[PLAIN]],
    );
    const { round, trips } = await secondRound(PLAIN);
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 2 });
    expect(trips).toEqual([
      SCAN,
      [
        'begin',
        'context',
        'fan-out',
        // named too, on its generic plan: no switch back to custom plans between them (ADR 1207's addendum)
        'claim retries',
        'commit; START TRANSACTION',
      ],
      ['context', 'outcome', 'COMMIT'],
    ]);
  });

  it('a webhook: the fan-out, the requests outside any transaction, the outcome in one of its own', async () => {
    const { round, trips } = await secondRound(HOOKED, {
      webhooks: [{ name: 'hook', url: `${receiver.baseUrl}/hook`, events: [HOOKED], timeoutMs: 5000 }],
    });
    expect(round).toMatchObject({ eventsClaimed: 2, succeeded: 2 });
    expect(trips).toEqual([
      SCAN,
      ['begin', 'context', 'fan-out', 'commit; START TRANSACTION'],
      ['ROLLBACK'],
      ['begin', 'context', 'outcome', 'commit'],
    ]);
  });
});

/**
 * Which claim a round sends (the lean claim of new events, or the fan-out): lean where every consumer of the
 * events is one of this instance's in-process consumers, the fan-out otherwise.
 */
describe('the claim a round sends', () => {
  let db: TestDatabase;
  let t: TestApp;
  let probe: RoundTripProbe;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  beforeEach(async () => {
    t = await buildApp({ url: db.url, providers: [Consumers] });
    probe = RoundTripProbe.attach(t.dataSource);
  });
  afterEach(async () => {
    probe.detach();
    await t.close();
    await truncateOutbox(db);
    await db.sql(`delete from outbox_consumers where name = 'elsewhere'`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** The claims of a round: `lean` or `fan-out`, in order. */
  async function claimsOfRound(): Promise<string[]> {
    probe.take();
    await t.relay.runOnce();
    return probe
      .take()
      .statements.filter((s) => relayStatement.claim(s, TENANT))
      .map((s) => (relayStatement.fanOut(s) ? 'fan-out' : 'lean'));
  }

  /** The claims of a round of `count` new events of `eventName`. */
  async function claimsOf(eventName: string, count = 1): Promise<string[]> {
    await enqueueManyIn(
      t,
      Array.from({ length: count }, (_, i) => ({ eventName, payload: { i } })),
    );
    return claimsOfRound();
  }

  it("is lean for events of this instance's in-process consumers alone", async () => {
    expect(await claimsOf(PLAIN, 3)).toEqual(['lean']);
  });

  it("falls back to the fan-out when another instance's consumer takes the events too, and sends only that for a while", async () => {
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, last_seen_at) values ('elsewhere', $1, now())`,
      [[PLAIN]],
    );
    expect(await claimsOf(PLAIN, 2)).toEqual(['lean', 'fan-out']);
    expect(await claimsOf(PLAIN)).toEqual(['fan-out']);
  });

  it('falls back to the fan-out for events nobody consumes, and is lean again for the next', async () => {
    expect(await claimsOf('test.unheard.v1')).toEqual(['lean', 'fan-out']);
    expect(await claimsOf(PLAIN)).toEqual(['lean']);
  });

  it('falls back to the fan-out while a fanned-out event of the tenant waits for recovery', async () => {
    const [stale] = await enqueueManyIn(t, [{ eventName: PLAIN }]);
    await db.sql(`update event_outbox set status = 'processing', deliveries_open = 1 where id = $1`, [stale]);
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       values ($1, $2, gen_random_uuid(), now() - interval '1 second')`,
      [stale, TENANT],
    );
    expect(await claimsOfRound()).toEqual(['lean', 'fan-out']);
  });
});

/**
 * `enqueue`'s insert: a named statement on the app's connections (`preparedStatements`), one name per text
 * (enqueue's and enqueueMany's); unnamed in a handler's batch transaction, with
 * `preparedStatements: false`, and once a connection has lost it.
 */
describe("enqueue's insert", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  afterEach(() => truncateOutbox(db));

  /** The inserts `work` sends on an app of one connection, by name (`undefined`: unnamed) and text. */
  async function insertsOf(
    outbox: { preparedStatements?: boolean },
    work: (t: TestApp) => Promise<void>,
  ): Promise<ProbedStatement[]> {
    const options: BuildAppOptions = {
      url: db.url,
      typeorm: false,
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url, extra: { max: 1 } })],
      // without wake-ups
      outbox: { preparedStatements: outbox.preparedStatements, relay: { wakeUps: 'off' } },
    };
    return (await sentBy(options, work)).filter(isInsert);
  }

  const NAMED = /^outbox_enqueue_[0-9a-f]{12}$/;

  it('names it, one name for enqueue and one for enqueueMany, each sent again under its name', async () => {
    const inserts = await insertsOf({}, async (t) => {
      for (const i of [1, 2, 3]) await enqueueIn(t, { eventName: PLAIN, payload: { i } });
      await enqueueManyIn(t, [{ eventName: PLAIN }, { eventName: PLAIN }]);
      await enqueueManyIn(t, [{ eventName: PLAIN }]);
    });
    expect(inserts).toHaveLength(5);
    for (const insert of inserts) expect(insert.name).toMatch(NAMED);
    expect(new Set(inserts.map((s) => s.name)).size).toBe(2);
  });

  it('sends it unnamed with preparedStatements false', async () => {
    const inserts = await insertsOf({ preparedStatements: false }, async (t) => {
      await enqueueIn(t, { eventName: PLAIN });
      await enqueueManyIn(t, [{ eventName: PLAIN }, { eventName: PLAIN }]);
    });
    expect(inserts.map((s) => s.name)).toEqual([undefined, undefined]);
  });

  it("sends a handler's follow-up unnamed, through its batch transaction", async () => {
    const inserts = await insertsOf({}, async (t) => {
      await enqueueIn(t, { eventName: CHAIN });
      expect(await t.relay.runOnce()).toMatchObject({ succeeded: 1 });
    });
    const followUps = inserts.filter((s) => s.values.includes(FOLLOW_UP));
    expect(followUps).toHaveLength(1);
    expect(followUps[0]!.name).toBeUndefined();
    expect(followUps[0]!.text).toMatch(/^insert into public\.event_outbox/);
  });

  it('sends it unnamed once the connection lost it', async () => {
    const inserts = await insertsOf({}, async (t) => {
      await enqueueIn(t, { eventName: PLAIN });
      const attempt = t.dataSource.transaction(async (manager) => {
        await manager.query('deallocate all');
        await t.outbox.enqueue(manager, { tenantId: TENANT, eventName: PLAIN, payload: {} });
      });
      await expect(attempt).rejects.toThrow(/no longer had the outbox's named insert/);
      await enqueueIn(t, { eventName: PLAIN });
    });
    expect(inserts.map((s) => s.name)).toEqual([expect.stringMatching(NAMED), inserts[0]!.name, undefined]);
  });
});

/**
 * The relay's named statements (`preparedStatements`, on by default): the claim, the outcome and a handler's
 * context, run with a generic plan. The apps here have a pool of one connection.
 */
describe("the relay's named statements", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** What `work` sends on an app of one connection. */
  const onOneConnection = (
    preparedStatements: boolean | undefined,
    work: (t: TestApp, probe: RoundTripProbe) => Promise<void>,
    options: Pick<BuildAppOptions, 'imports'> = {},
  ): Promise<ProbedStatement[]> =>
    sentBy({ url: db.url, poolSize: 1, outbox: { preparedStatements }, ...options }, work);

  it("switches to generic plans in the transaction's context statement, not in a statement of its own", async () => {
    const sent = await onOneConnection(undefined, async (t) => {
      await enqueueManyIn(t, [{ eventName: PLAIN }, { eventName: PLAIN }, { eventName: PLAIN }]);
      expect(await t.relay.runOnce()).toMatchObject({ succeeded: 3 });
    });
    const switches = sent.filter((s) => s.text.includes('plan_cache_mode'));
    // the claim's context before the claim, the batch's context before its outcome: both named statements
    expect(switches).toHaveLength(2);
    for (const s of switches) {
      expect(s.text).toMatch(
        /^select concat\(set_config\(\$1, \$2, true\), set_config\('idle_in_transaction/,
      );
      const next = sent[sent.indexOf(s) + 1]!;
      expect(next.trip).toBe(s.trip);
      expect(next.name).toMatch(/^outbox_(claim_new|outcome)_[0-9a-f]{12}$/);
    }
  });

  it("runs a writing handler's context as a named statement, one name for every handler (with a savepoint each)", async () => {
    const contexts = async (preparedStatements: boolean): Promise<(string | undefined)[]> =>
      (
        await onOneConnection(
          preparedStatements,
          async (t) => {
            for (const count of [3, 2]) {
              await enqueueManyIn(
                t,
                Array.from({ length: count }, (_, i) => ({ eventName: WRITTEN, payload: { i } })),
              );
              expect(await t.relay.runOnce()).toMatchObject({ succeeded: 2 * count });
            }
          },
          // as a batch runs again after a writing handler failed (ADR 1001)
          { imports: [PolicySwitches.of({ optimisticBatches: false })] },
        )
      )
        .filter(relayStatement.handlerContext)
        .map((s) => s.name);
    const named = await contexts(true);
    expect(named).toHaveLength(10);
    expect(new Set(named).size).toBe(1);
    expect(named[0]).toMatch(/^outbox_handler_context_[0-9a-f]{12}$/);
    expect(await contexts(false)).toEqual(Array.from({ length: 10 }, () => undefined));
  });

  it("names the claim anew when a round lets the connection go, never in a claim's round trip, and plans it then", async () => {
    let names: string[] = [];
    const sent = await onOneConnection(undefined, async (t, probe) => {
      const claimNames = (): string[] => [
        ...new Set(probe.seen.flatMap((s) => (relayStatement.claimNewName(s.name) ? [s.name] : []))),
      ];
      await waitFor(
        async () => {
          await enqueueIn(t, { eventName: PLAIN });
          await t.relay.runOnce();
          return claimNames().length >= 2;
        },
        { timeoutMs: 5000, intervalMs: 100, message: 'the claim named anew' },
      );
      names = claimNames();
    });
    // the new name's first use: a claim for no tenant, rolled back in the same round trip, which makes the
    // claim's generic plan there and then (the fan-out's too); no claim of the app's tenant goes with it
    const firstUse = sent.find((s) => s.name === names[1])!;
    const trip = sent.filter((s) => s.trip === firstUse.trip);
    expect(firstUse.values[0]).toBe('00000000-0000-0000-0000-000000000000');
    expect(trip.map((s) => s.text)).toContain('rollback');
    expect(trip.some((s) => s.values[0] === TENANT)).toBe(false);
    expect(trip.some((s) => relayStatement.fanOutName(s.name))).toBe(true);
  });
});

/** Where the relay sets its bound (relay.leaseMs, 20 s here) on a statement it sends outside a batch. */
describe("the relay's bound on its other statements", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /**
   * Every statement of `sent` that `which` picks has the bound set before it in its round trip:
   * transaction-local (`local`) or for the session (a statement that cannot run in a transaction).
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

  /** What `work` sends on an app with a lease of 20 s (and the lease vacuum after every batch). */
  const bounded = (work: (t: TestApp, probe: RoundTripProbe) => Promise<void>): Promise<ProbedStatement[]> =>
    sentBy(
      {
        url: db.url,
        outbox: {
          handlerTimeoutMs: 10_000,
          relay: { leaseMs: 20_000, wakeUps: 'off', vacuumLeasesEvery: 1 },
        },
      },
      work,
    );

  it('bounds its scan for due tenants in the same round trip', async () => {
    const sent = await bounded(async (t) => {
      await enqueueManyIn(t, [{ eventName: PLAIN }, { eventName: PLAIN }]);
      await t.relay.drain();
    });
    expectBoundedBefore(sent, relayStatement.dueTenantScan, true);
  });

  it('bounds its registry heartbeat in the same round trip', async () => {
    const sent = await bounded((t) => t.relay.heartbeat());
    expectBoundedBefore(sent, (s) => /insert into \S*outbox_consumers/i.test(s.text), true);
  });

  it('bounds its lease vacuum for the session, in the same round trip', async () => {
    const vacuum = (s: ProbedStatement): boolean => /^vacuum /i.test(s.text);
    const sent = await bounded(async (t, probe) => {
      await enqueueManyIn(t, [{ eventName: PLAIN }, { eventName: PLAIN }]);
      await t.relay.drain();
      await waitFor(() => probe.seen.some(vacuum), { timeoutMs: 5000, message: 'the lease vacuum' });
    });
    expectBoundedBefore(sent, vacuum, false);
  });
});

/** So long that only a wake-up can deliver within a test's deadline. */
const NEVER_POLL = 600_000;

describe('the statements of wake-ups', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(() => truncateOutbox(db));
  afterAll(async () => {
    await db?.drop();
  });

  it('claims a lone event once: after a short batch the relay waits for the next wake-up instead of going round again', async () => {
    const relay = { enabled: true, pollIntervalMs: NEVER_POLL, wakeUps: 'off' as const };
    const sent = await sentBy({ url: db.url, outbox: { relay } }, async (t) => {
      const id = await enqueueIn(t, { eventName: PLAIN });
      await waitFor(() => t.app.get(Consumers).seen.includes(id), {
        timeoutMs: 5000,
        message: 'the event delivered through the in-process wake-up',
      });
      // waits for whatever round is still in flight (a second round would have begun before the batch committed)
      await t.relay.stop();
    });
    expect({
      claims: sent.filter((s) => relayStatement.claim(s, TENANT)).length,
      scans: sent.filter(relayStatement.dueTenantScan).length,
    }).toEqual({ claims: 1, scans: 1 });
  });

  it('scans for due tenants once per poll interval while wake-ups bring rounds without a backlog, every 100 ms with pacedScans off', async () => {
    const relay = { enabled: true, pollIntervalMs: NEVER_POLL, wakeUps: 'off' as const };
    const scansOf = async (pacedScans: boolean): Promise<number> => {
      const imports = [PolicySwitches.of({ pacedScans })];
      const sent = await sentBy({ url: db.url, imports, outbox: { relay } }, async (t) => {
        for (const _ of [1, 2, 3]) {
          const id = await enqueueIn(t, { eventName: PLAIN });
          await waitFor(() => t.app.get(Consumers).seen.includes(id), {
            timeoutMs: 5000,
            message: 'the event delivered through the in-process wake-up',
          });
          // longer than the 100 ms after which a wake-up's round scanned again
          const quiet = Date.now() + 150;
          await waitFor(() => Date.now() >= quiet, { timeoutMs: 5000, message: 'a quiet spell of 150 ms' });
        }
        await t.relay.stop();
      });
      return sent.filter(relayStatement.dueTenantScan).length;
    };
    // the first round's scan (no scan had listed every due tenant yet), then one per poll (none here)
    expect(await scansOf(true)).toBe(1);
    expect(await scansOf(false)).toBe(3);
  });

  it('carries the wake-up in the first insert after a quiet spell, none for a rollback, and sends one on a connection of its own after a commit whose savepoint rolled back the carrier', async () => {
    const relay = { enabled: false, wakeUps: 'notify' as const };
    const imports = [PolicySwitches.of({ wakeUpGapMs: 50 })];
    const quietSpell = async (): Promise<void> => {
      const quiet = Date.now() + 60;
      await waitFor(() => Date.now() >= quiet, {
        timeoutMs: 5000,
        message: 'a quiet spell longer than the gap',
      });
    };
    const sent = await sentBy({ url: db.url, imports, outbox: { relay } }, async (producer, probe) => {
      await enqueueIn(producer, { eventName: PLAIN });
      await quietSpell();
      const runner = producer.dataSource.createQueryRunner();
      await runner.startTransaction();
      try {
        await producer.outbox.enqueue(runner.manager, {
          tenantId: TENANTS[1],
          eventName: PLAIN,
          payload: {},
        });
      } finally {
        await runner.rollbackTransaction();
        await runner.release();
      }
      await quietSpell();
      await producer.dataSource.transaction(async (manager) => {
        // the savepoint's insert carries the wake-up, and is rolled back with it
        await manager
          .transaction(async (inner) => {
            await producer.outbox.enqueue(inner, { tenantId: TENANTS[0], eventName: PLAIN, payload: {} });
            throw new Error('savepoint rolled back');
          })
          .catch(() => undefined);
        await producer.outbox.enqueue(manager, { tenantId: TENANTS[0], eventName: PLAIN, payload: {} });
      });
      await waitFor(() => probe.seen.some((s) => s.text.startsWith('select set_config(')), {
        timeoutMs: 5000,
        message: 'the wake-up on a connection of its own',
      });
    });
    // the first insert of each transaction after a quiet spell carried it; no statement of its own until the last
    const notifying = sent.filter((s) => s.text.includes('pg_notify'));
    expect(notifying.map((s) => (isCarryingInsert(s) ? 'insert' : s.text.slice(0, 18)))).toEqual([
      'insert',
      'insert',
      'insert',
      'select set_config(',
    ]);
    const commits = sent.flatMap((s, i) => (/^commit$/i.test(s.text.trim()) ? [i] : []));
    expect(sent.indexOf(notifying[3]!)).toBeGreaterThan(commits[commits.length - 1]!);
  });

  it('claims the tenants wake-ups named without waiting for its scan for other due tenants', async () => {
    // One tenant per scan makes every scan incomplete, so each round scans again; the tenant whose batch came
    // back full (a hint, as a wake-up naming it would be) is claimed beside that scan, not after it (ADR 1106).
    const [first, second] = ['88888881-8888-4888-8888-888888888888', '88888882-8888-4888-8888-888888888888'];
    const relay = { batchSize: 2, maxBatchSize: 2, maxTenantsPerRound: 1, concurrency: 1 };
    const sent = await sentBy({ url: db.url, outbox: { relay } }, async (t, probe) => {
      await enqueueManyIn(t, [
        ...Array.from({ length: 5 }, () => ({ tenantId: first, eventName: PLAIN })),
        { tenantId: second, eventName: PLAIN },
      ]);
      expect((await t.relay.runOnce()).tenants).toBe(1);
      probe.take();
      expect((await t.relay.runOnce()).tenants).toBe(2);
    });
    const claimOfFirst = sent.find((s) => relayStatement.claim(s, first));
    const scan = sent.find(relayStatement.dueTenantScan);
    // the two were in flight together: the scan sent before the claim's answer came (not after the visit), the
    // claim before the scan's answer (it did not wait for it)
    expect(scan!.sentAt).toBeLessThan(claimOfFirst!.sentAt + claimOfFirst!.ms);
    expect(claimOfFirst!.sentAt).toBeLessThan(scan!.sentAt + scan!.ms);
    // the tenant the scan found is claimed once it answered
    expect(sent.find((s) => relayStatement.claim(s, second))!.sentAt).toBeGreaterThanOrEqual(
      scan!.sentAt + scan!.ms,
    );
  });
});
