import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, OutboxConfigurationError, OutboxRetention } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_TABLE_SQL,
  effects,
  enqueueManyIn,
  TENANTS,
  truncateOutbox,
  type TestEvent,
} from '../support/outbox-fixture';
import { FaultFleet } from '../faults/support/fault-fleet';
import { forgetInstance, heartbeatConsumers, outboxNames } from '../../libs/outbox/src/store/sql';
import { waitFor } from '../support/wait-for';

/** Three relay processes (test/support/limited-relay-child.ts), each running three batches at once. */
const CHILD = join(__dirname, '..', 'support', 'limited-relay-child.ts');
/** The claim size of the rate tests' relays: a started batch may overrun a window by at most this. */
const BATCH = 5;

const PROBE_SQL = `create table limit_probe (
  id bigint generated always as identity primary key,
  consumer text not null,
  event_id uuid not null,
  seq int,
  relay int not null,
  claimed_at timestamptz,
  started_at timestamptz not null default clock_timestamp(),
  ended_at timestamptz
)`;

let db: TestDatabase;
let app: TestApp;
let fleet: FaultFleet | null = null;

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL, PROBE_SQL]);
  app = await buildApp({ url: db.url });
});

afterEach(async () => {
  await truncateOutbox(db, 'test_effects', 'limit_probe');
});

afterAll(async () => {
  await fleet?.stopAll();
  await app.close();
  await db.drop();
});

/** Three relay processes, for the tests of one `describe`: the last started is stopped first. */
function useFleet(env: Record<string, string>): () => FaultFleet {
  beforeAll(async () => {
    await fleet?.stopAll();
    fleet = new FaultFleet({ DATABASE_URL: db.url, ...env }, CHILD);
    await fleet.start(3);
  });
  return () => fleet!;
}

/** `count` events named `eventName`, spread over the three tenants, `seq` in each payload. */
function spread(
  eventName: string,
  count: number,
  extra: (i: number) => Partial<TestEvent> = () => ({}),
): TestEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    eventName,
    tenantId: TENANTS[i % TENANTS.length],
    payload: { seq: i },
    ...extra(i),
  }));
}

/** Waits until `consumer` wrote an effect for each of `ids` and has no delivery open; returns its effects. */
async function drained(consumer: string, ids: readonly string[], timeoutMs = 20_000): Promise<string[]> {
  await waitFor(
    async () => {
      const [open] = await db.sql<{ n: number }>(
        `select count(*)::int n from outbox_deliveries where consumer_name = $1 and status <> 'delivered'`,
        [consumer],
      );
      return (await effects(db, consumer)).length >= ids.length && open!.n === 0;
    },
    { timeoutMs, message: `${consumer} to deliver ${ids.length} events` },
  );
  return (await effects(db, consumer)).map((e) => e.event_id);
}

/** The most handlers of `consumer` running at once, by their own probe rows; a run with no end ended at `cut`. */
async function peakInFlight(consumer: string, cut: Date): Promise<number> {
  const [row] = await db.sql<{ peak: number }>(
    `with steps as (
       select started_at as at, 1 as step from limit_probe where consumer = $1
       union all
       select coalesce(ended_at, $2::timestamptz), -1 from limit_probe where consumer = $1
     )
     select max(running)::int as peak
       from (select sum(step) over (order by at, step rows unbounded preceding) as running from steps) s`,
    [consumer, cut],
  );
  return row!.peak;
}

/**
 * When the claims of `consumer`'s deliveries committed, as its handlers found them (their lease's end less
 * relay.leaseMs), in ms since the first, in order. A handler starts later than its claim by the batch's earlier
 * handlers: windows over claims, not over handler starts, are what the limit bounds.
 */
async function claims(consumer: string): Promise<number[]> {
  const rows = await db.sql<{ ms: number }>(
    `select (extract(epoch from claimed_at - min(claimed_at) over ()) * 1000)::float8 as ms
       from limit_probe where consumer = $1 order by claimed_at`,
    [consumer],
  );
  return rows.map((r) => r.ms);
}

/** The most of `at` (ms) in any window of `intervalMs`, each window opening at one of them. */
function busiestWindow(at: readonly number[], intervalMs: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (j < at.length && at[j]! < at[i]! + intervalMs) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

const sorted = (ids: readonly string[]): string[] => [...ids].sort();

describe('a concurrency cap across relay processes', () => {
  // claims of one delivery: a batch runs its handlers one after another, so each in flight is a batch of its own
  const relays = useFleet({ HOLD_MS: '40', BATCH_SIZE: '1' });

  it('keeps a concurrency cap of 4 across three relays, one killed with SIGKILL mid-batch, losing and repeating nothing', async () => {
    const ids = await enqueueManyIn(app, spread('test.lim.capped.v1', 90));
    const victim = relays().relays[0]!.process.pid!;
    // kill it while one of its handlers runs
    await waitFor(
      async () =>
        (await db.sql(`select 1 from limit_probe where relay = $1 and ended_at is null`, [victim])).length >
        0,
      { message: 'a handler of the first relay in flight' },
    );
    await relays().killAndRestart(0);
    const [{ cut }] = (await db.sql<{ cut: Date }>(`select clock_timestamp() as cut`)) as [{ cut: Date }];
    // the dead relay's leases end now rather than after relay.leaseMs (its handlers died with it)
    const ended = await db.sql(
      `update outbox_deliveries set lease_expires_at = now() - interval '1 second'
        where status = 'processing' and lease_token in (
          select d.lease_token from outbox_deliveries d join limit_probe p on p.event_id = d.event_id
           where p.relay = $1 and p.ended_at is null and d.consumer_name = 'capped' and d.status = 'processing')
       returning id`,
      [victim],
    );

    const delivered = await drained('capped', ids);
    expect(sorted(delivered)).toEqual(sorted(ids));
    expect(ended.length).toBeGreaterThan(0);
    const peak = await peakInFlight('capped', cut);
    expect(peak).toBeLessThanOrEqual(4);
    // the relays did run side by side (nine batches at once without the cap)
    expect(peak).toBeGreaterThanOrEqual(3);
    // the killed relay's deliveries waited, uncharged by the wait, and were taken over once
    const [charged] = await db.sql<{ max: number }>(
      `select max(attempt_count)::int as max from outbox_deliveries where consumer_name = 'capped'`,
    );
    expect(charged!.max).toBeLessThanOrEqual(2);
  });
});

describe('a limit only the newer of two relays declares (a rolling deploy)', () => {
  const common = { HOLD_MS: '40', BATCH_SIZE: '1', HEARTBEAT_MS: '200' };
  let older: FaultFleet;
  let newer: FaultFleet;
  beforeAll(async () => {
    await fleet?.stopAll();
    fleet = null;
    // the older version's relay starts first, as in a deploy; its 'capped' has no limit
    older = new FaultFleet({ DATABASE_URL: db.url, ...common, NO_CAP: '1' }, CHILD);
    await older.start(1);
    newer = new FaultFleet({ DATABASE_URL: db.url, ...common }, CHILD);
    await newer.start(1);
  });
  afterAll(async () => {
    await older?.stopAll();
    await newer?.stopAll();
  });

  it("is enforced by both: the older relay's beats keep it in the registry, and its claims take turns", async () => {
    const cap = () =>
      db.sql<{ concurrency: number | null }>(
        `select concurrency from outbox_consumers where name = 'capped'`,
      );
    await waitFor(async () => (await cap())[0]?.concurrency === 4, { message: "the newer relay's limit" });
    const [{ since }] = (await db.sql<{ since: Date }>(`select clock_timestamp() as since`)) as [
      { since: Date },
    ];
    // both relays beat since: the older one left the limit, and read it
    await waitFor(
      async () => {
        const [row] = await db.sql<{ n: number }>(
          `select count(*)::int n from outbox_consumer_instances
            where consumer_name = 'capped' and last_seen_at > $1`,
          [since],
        );
        return row!.n === 2;
      },
      { message: 'both relays to beat' },
    );

    const ids = await enqueueManyIn(app, spread('test.lim.capped.v1', 60));
    const delivered = await drained('capped', ids);
    expect(sorted(delivered)).toEqual(sorted(ids));
    const [{ cut }] = (await db.sql<{ cut: Date }>(`select clock_timestamp() as cut`)) as [{ cut: Date }];
    expect(await peakInFlight('capped', cut)).toBeLessThanOrEqual(4);
    expect((await cap())[0]!.concurrency).toBe(4);
    // both relays delivered (the older one did not just stand by)
    const pids = [older.relays[0]!.process.pid, newer.relays[0]!.process.pid];
    const byRelay = await db.sql<{ relay: number }>(`select distinct relay from limit_probe`);
    expect(byRelay.map((r) => r.relay).sort()).toEqual([...pids].sort());
  });
});

describe("a limit the newer of two relays declares, when the older relay's host clock is ahead", () => {
  let older: FaultFleet;
  let newer: FaultFleet;
  afterAll(async () => {
    await older?.stopAll();
    await newer?.stopAll();
  });

  it("holds: which relay started last is read on the database's clock, not on each host's", async () => {
    await fleet?.stopAll();
    fleet = null;
    const common = { DATABASE_URL: db.url, HOLD_MS: '0', BATCH_SIZE: '1', HEARTBEAT_MS: '100' };
    // the older version's relay (no limit on 'capped') starts first, on a host whose clock is 10 minutes ahead
    older = new FaultFleet({ ...common, NO_CAP: '1', CLOCK_SKEW_MS: '600000' }, CHILD);
    await older.start(1);
    const [{ since }] = (await db.sql<{ since: Date }>(`select clock_timestamp() as since`)) as [
      { since: Date },
    ];
    newer = new FaultFleet(common, CHILD);
    await newer.start(1);
    // both relays beat after the newer one started
    const beatSince = async (at: Date) => {
      const [row] = await db.sql<{ n: number }>(
        `select count(*)::int n from outbox_consumer_instances
          where consumer_name = 'capped' and last_seen_at > $1`,
        [at],
      );
      return row!.n === 2;
    };
    await waitFor(() => beatSince(since), { message: 'both relays to beat' });
    const [{ beaten }] = (await db.sql<{ beaten: Date }>(`select clock_timestamp() as beaten`)) as [
      { beaten: Date },
    ];
    await waitFor(() => beatSince(beaten), { message: 'both relays to beat again' });
    const [row] = await db.sql<{ concurrency: number | null }>(
      `select concurrency from outbox_consumers where name = 'capped'`,
    );
    expect(row!.concurrency).toBe(4);
  });
});

describe("the registry's limits, as heartbeats write them", () => {
  const beat = async (startedAt: Date, cap?: number) => {
    const limits =
      cap === undefined
        ? undefined
        : {
            concurrency: cap,
            tenantConcurrency: null,
            rateLimit: null,
            rateIntervalMs: null,
            ratePerTenant: false,
          };
    const statement = heartbeatConsumers(
      outboxNames(),
      `instance-${startedAt.getTime()}`,
      [{ name: 'beat-spec', eventNames: ['test.lim.beat.v1'], kind: 'handler', limits }],
      startedAt,
    );
    const [row] = await db.sql<{ started_at: Date; limited: string[] }>(statement.text, statement.values);
    expect(row!.started_at).toEqual(startedAt);
    return row!.limited;
  };
  const concurrency = async () =>
    (
      await db.sql<{ c: number | null }>(
        `select concurrency c from outbox_consumers where name = 'beat-spec'`,
      )
    )[0]!.c;

  it('are those of the instance started last: an older one leaves them and learns them; a newer one sets them', async () => {
    const t = Date.now();
    expect(await beat(new Date(t), 4)).toEqual(['beat-spec']);
    // an instance started earlier (an older version still running) declares none: the limit stays, and it reads it
    expect(await beat(new Date(t - 60_000))).toEqual(['beat-spec']);
    expect(await concurrency()).toBe(4);
    // an instance started later (the next deploy) sets its own, or none
    expect(await beat(new Date(t + 60_000), 2)).toEqual(['beat-spec']);
    expect(await concurrency()).toBe(2);
    expect(await beat(new Date(t + 120_000))).toEqual([]);
    expect(await concurrency()).toBeNull();
    expect(await beat(new Date(t + 60_000), 2)).toEqual([]);
    expect(await concurrency()).toBeNull();
  });
});

describe('the limits of an instance that left the registry', () => {
  const declare = (instance: string, startedAt: Date | null, cap: number) =>
    heartbeatConsumers(
      outboxNames(),
      instance,
      [
        {
          name: 'left-spec',
          eventNames: ['test.lim.left.v1'],
          kind: 'handler',
          limits: {
            concurrency: cap,
            tenantConcurrency: null,
            rateLimit: null,
            rateIntervalMs: null,
            ratePerTenant: false,
          },
        },
      ],
      startedAt,
    );
  const run = async (statement: { text: string; values: unknown[] }) =>
    (await db.sql<{ started_at: Date }>(statement.text, statement.values))[0];

  it('give way to those of the instances still running (a canary removed, a blue-green switch back)', async () => {
    const old = (await run(declare('old', null, 4)))!.started_at;
    // a canary of the next version starts, declaring 2, and is removed (it leaves the registry)
    await run(declare('canary', null, 2));
    await run(forgetInstance(outboxNames(), 'canary'));
    // the instance still running beats: its limit is the one in force
    await run(declare('old', old, 4));
    const [row] = await db.sql<{ c: number | null }>(
      `select concurrency c from outbox_consumers where name = 'left-spec'`,
    );
    expect(row!.c).toBe(4);
  });

  it('give way once the newest instance stops reporting (a crash: three heartbeats missed)', async () => {
    await db.sql(`delete from outbox_consumer_instances where consumer_name = 'left-spec'`);
    const old = (await run(declare('old-2', null, 4)))!.started_at;
    await run(declare('crashed', null, 2));
    const cap = async () =>
      (
        await db.sql<{ c: number | null }>(
          `select concurrency c from outbox_consumers where name = 'left-spec'`,
        )
      )[0]!.c;
    // still reporting: the old instance's beat leaves the newer one's limits
    await run(declare('old-2', old, 4));
    expect(await cap()).toBe(2);
    // its last beat three heartbeats (30 s each, the default) and more ago
    await db.sql(
      `update outbox_consumer_instances set last_seen_at = now() - interval '91 seconds' where instance_id = 'crashed'`,
    );
    await run(declare('old-2', old, 4));
    expect(await cap()).toBe(4);
  });
});

describe('rate limits across relay processes', () => {
  useFleet({ HOLD_MS: '0', BATCH_SIZE: String(BATCH) });

  it('claims at most 20 per 500 ms across three relays, within 10% of that rate, each event once', async () => {
    const ids = await enqueueManyIn(app, spread('test.lim.rated.v1', 100));

    const delivered = await drained('rated', ids);
    expect(sorted(delivered)).toEqual(sorted(ids));
    const at = await claims('rated');
    expect(busiestWindow(at, 500)).toBeLessThanOrEqual(20 + BATCH);
    // four intervals from the first claim: 80 at the limit
    const firstFour = at.filter((ms) => ms < 2000).length;
    expect(firstFour).toBeGreaterThanOrEqual(72);
    expect(firstFour).toBeLessThanOrEqual(80 + BATCH);
    // nothing was charged for waiting
    const [charged] = await db.sql<{ max: number }>(
      `select max(attempt_count)::int as max from outbox_deliveries where consumer_name = 'rated'`,
    );
    expect(charged!.max).toBe(1);
  });

  it('keeps each aggregate in order for an ordered consumer with a rate limit, and holds the rate', async () => {
    // six aggregates: without the limit, one claim takes the next event of each (six at a time)
    const events = Array.from({ length: 48 }, (_, i) => ({
      eventName: 'test.lim.ordered.v1',
      tenantId: TENANTS[0],
      aggregateType: 'account',
      aggregateId: `a${i % 6}`,
      payload: { seq: i },
    }));
    const ids = await enqueueManyIn(app, events);

    const delivered = await drained('ordered-rated', ids);
    expect(sorted(delivered)).toEqual(sorted(ids));
    for (let aggregate = 0; aggregate < 6; aggregate++) {
      const rows = await db.sql<{ seq: number }>(
        `select seq from limit_probe where consumer = 'ordered-rated' and seq % 6 = $1 order by started_at`,
        [aggregate],
      );
      const seqs = rows.map((r) => r.seq);
      expect(seqs).toEqual(Array.from({ length: 8 }, (_, k) => aggregate + 6 * k));
    }
    expect(busiestWindow(await claims('ordered-rated'), 300)).toBeLessThanOrEqual(10 + BATCH);
  });
});

describe('per-key rate limits across relay processes', () => {
  useFleet({ HOLD_MS: '0', BATCH_SIZE: String(BATCH) });

  /** The claims of `consumer` per key (`payload.partner`, or the aggregate id), in ms since `consumer`'s first. */
  async function claimsByKey(consumer: string, key: 'partner' | 'aggregate'): Promise<Map<string, number[]>> {
    const rows = await db.sql<{ key: string; ms: number }>(
      `select ${key === 'partner' ? "e.payload->>'partner'" : 'e.aggregate_id'} as key,
              (extract(epoch from p.claimed_at - min(p.claimed_at) over ()) * 1000)::float8 as ms
         from limit_probe p join event_outbox e on e.id = p.event_id
        where p.consumer = $1 order by p.claimed_at`,
      [consumer],
    );
    const byKey = new Map<string, number[]>();
    for (const r of rows) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r.ms]);
    return byKey;
  }

  it('claims at most 10 per 500 ms of each key, each key at that rate beside the other, each event once and uncharged', async () => {
    // two busy partners in one tenant, interleaved: 60 events each, 3 s of work each at the limit
    const busy = Array.from({ length: 120 }, (_, i) => ({
      eventName: 'test.lim.keyed.v1',
      tenantId: TENANTS[0],
      payload: { seq: i, partner: i % 2 === 0 ? 'a' : 'b' },
    }));
    const ids = await enqueueManyIn(app, busy);
    // a third partner's few events, once the busy ones are under way: they do not queue behind them
    await waitFor(
      async () => (await db.sql(`select 1 from limit_probe where consumer = 'keyed'`)).length >= 20,
      {
        message: 'the busy partners under way',
      },
    );
    const late = await enqueueManyIn(
      app,
      Array.from({ length: 3 }, (_, i) => ({
        eventName: 'test.lim.keyed.v1',
        tenantId: TENANTS[0],
        payload: { seq: 1000 + i, partner: 'c' },
      })),
    );

    const delivered = await drained('keyed', [...ids, ...late]);
    expect(sorted(delivered)).toEqual(sorted([...ids, ...late]));
    const byKey = await claimsByKey('keyed', 'partner');
    for (const key of ['a', 'b']) {
      const at = byKey.get(key)!.map((ms) => ms - byKey.get(key)![0]!);
      expect(at).toHaveLength(60);
      expect(busiestWindow(at, 500)).toBeLessThanOrEqual(10 + BATCH);
      // four intervals from the key's first claim: 40 at the limit, whatever the other key does
      const firstFour = at.filter((ms) => ms < 2000).length;
      expect(firstFour).toBeGreaterThanOrEqual(36);
      expect(firstFour).toBeLessThanOrEqual(40 + BATCH);
    }
    // the late partner was claimed while the busy ones still waited for their windows
    const lastLate = Math.max(...byKey.get('c')!);
    expect(byKey.get('a')!.filter((ms) => ms <= lastLate).length).toBeLessThan(50);
    const [charged] = await db.sql<{ max: number }>(
      `select max(attempt_count)::int as max from outbox_deliveries where consumer_name = 'keyed'`,
    );
    expect(charged!.max).toBe(1);
    // the log keeps one interval: no key's rows outlive their window by more than the last claim
    const [kept] = await db.sql<{ n: number }>(
      `select count(*)::int n from outbox_consumer_key_starts
        where consumer_name = 'keyed' and started_at < clock_timestamp() - interval '2 seconds'`,
    );
    expect(kept!.n).toBeLessThanOrEqual(3);
  });

  it('keeps each aggregate in order under a limit per aggregate, at most 2 per 400 ms each; a busy aggregate holds no other back', async () => {
    // one busy aggregate (12 events: six windows at 2 per 400 ms) and five of 3 events each
    const events = [
      ...Array.from({ length: 12 }, (_, i) => ({ aggregateId: 'busy', seq: i })),
      ...Array.from({ length: 15 }, (_, i) => ({ aggregateId: `q${i % 5}`, seq: 100 + i })),
    ].map(({ aggregateId, seq }) => ({
      eventName: 'test.lim.keyed-ordered.v1',
      tenantId: TENANTS[1],
      aggregateType: 'account',
      aggregateId,
      payload: { seq },
    }));
    const ids = await enqueueManyIn(app, events);

    const delivered = await drained('keyed-ordered', ids);
    expect(sorted(delivered)).toEqual(sorted(ids));
    const rows = await db.sql<{ aggregate: string; seq: number }>(
      `select e.aggregate_id as aggregate, p.seq from limit_probe p join event_outbox e on e.id = p.event_id
        where p.consumer = 'keyed-ordered' order by p.started_at`,
    );
    const byAggregate = new Map<string, number[]>();
    for (const r of rows) byAggregate.set(r.aggregate, [...(byAggregate.get(r.aggregate) ?? []), r.seq]);
    for (const [, seqs] of byAggregate) expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    const byKey = await claimsByKey('keyed-ordered', 'aggregate');
    // an ordered aggregate's claims take one delivery each: one batch of a key is one delivery
    for (const [, at] of byKey) expect(busiestWindow(at, 400)).toBeLessThanOrEqual(2 + 1);
    // the busy aggregate at its limit: 12 claims span five windows; the small ones were done before it was half way
    const busy = byKey.get('busy')!;
    expect(busy[busy.length - 1]! - busy[0]!).toBeGreaterThanOrEqual(5 * 400 - 50);
    const smallDone = Math.max(...[0, 1, 2, 3, 4].map((q) => Math.max(...byKey.get(`q${q}`)!)));
    expect(busy.filter((ms) => ms <= smallDone).length).toBeLessThanOrEqual(6);
  });

  it("leaves retention what claims do not prune: rows past their window, and a gone consumer's", async () => {
    // a quiet tenant: no claim of the consumer there prunes its log
    await db.sql(
      `insert into outbox_consumer_key_starts (consumer_name, tenant_id, rate_key, started_at, n)
       values ('keyed', $1, md5('past')::uuid, now() - interval '1 hour', 1),
              ('keyed', $1, md5('live')::uuid, now() + interval '1 hour', 1),
              ('gone-consumer', $1, md5('any')::uuid, now(), 1)`,
      [TENANTS[2]],
    );
    await app.app.get(OutboxRetention).purgeNow();
    const left = await db.sql<{ consumer_name: string; live: boolean }>(
      `select consumer_name, rate_key = md5('live')::uuid as live from outbox_consumer_key_starts
        where tenant_id = $1`,
      [TENANTS[2]],
    );
    expect(left).toEqual([{ consumer_name: 'keyed', live: true }]);
  });
});

@Injectable()
class BadlyKeyed {
  @OnOutboxEvent('test.lim.bad.v1', {
    consumer: 'bad-key',
    rateLimit: { limit: 5, intervalMs: 1000, perKey: 'tenant' as never },
  })
  handle(): void {}

  @OnOutboxEvent('test.lim.bad.v1', {
    consumer: 'bad-key-too',
    rateLimit: { limit: 5, intervalMs: 1000, perKey: { payload: 'partner' }, perTenant: true },
  })
  handleToo(): void {}
}

describe('per-key rate limits at boot', () => {
  it('fail app.init() on a key that is neither the aggregate nor a payload path, or beside perTenant', async () => {
    const boot = buildApp({ url: db.url, providers: [BadlyKeyed] });
    await expect(boot).rejects.toBeInstanceOf(OutboxConfigurationError);
    // one error listing both, each naming its consumer and option
    await expect(boot).rejects.toThrow(
      /rateLimit\.perKey of BadlyKeyed#handle must [\s\S]*rateLimit\.perTenant of BadlyKeyed#handleToo must /,
    );
  });
});

@Injectable()
class BadlyLimited {
  @OnOutboxEvent('test.lim.bad.v1', {
    consumer: 'bad',
    concurrency: { global: 0 },
    rateLimit: { limit: 5 } as never,
  })
  handle(): void {}

  @OnOutboxEvent('test.lim.bad.v1', {
    consumer: 'bad-too',
    concurrency: {},
    rateLimit: { limit: 1.5, intervalMs: 1000 },
  })
  handleToo(): void {}
}

describe('consumer limits at boot', () => {
  it('fails app.init() listing every malformed limit, naming its consumer and option', async () => {
    const failed = await buildApp({ url: db.url, providers: [BadlyLimited] }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(OutboxConfigurationError);
    const text = (failed as Error).message;
    expect(text).toContain('concurrency.global of BadlyLimited#handle');
    expect(text).toContain('rateLimit.intervalMs of BadlyLimited#handle');
    expect(text).toContain('concurrency of BadlyLimited#handleToo');
    expect(text).toContain('rateLimit.limit of BadlyLimited#handleToo');
  });
});
