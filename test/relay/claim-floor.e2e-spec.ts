import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { OUTBOX_STORE_PORT } from '../../libs/outbox/src/store/outbox-store.port';
import type { PgRelayStore } from '../../libs/outbox/src/store/pg-relay-store';
import type { ClaimFloor } from '../../libs/outbox/src/store/claim-floor';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import {
  claimDueDeliveries,
  claimNewEvents,
  fanOutPendingEvents,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { partitionedLayoutStatements, runSql } from '../support/template-database';
import { buildApp, type TestApp } from '../support/build-app';
import {
  EFFECTS_TABLE_SQL,
  TENANT,
  TENANTS,
  ThingConsumers,
  effectIds,
  enqueueIn,
  truncateOutbox,
} from '../support/outbox-fixture';
import { PolicySwitches } from '../support/policy-switches';
import { mulberry32 } from '../faults/support/fault-random';

const DAY = 86_400_000;
const EVENT = 'test.thing.created.v1';
const CONSUMER = 'ThingConsumers.writeRow';
const names = outboxNames();
/** The batch of `start`'s relay. */
const BATCH = 10;

/** `yyyymmdd` of a UTC time: the suffix of its range's partitions. */
function day(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
}

/**
 * The partitions of the three histories that `statement`'s generic plan runs (`EXPLAIN ANALYZE` of a prepared
 * statement under `force_generic_plan`, in a transaction rolled back), and whether the executor pruned any at its
 * start ("Subplans Removed").
 */
async function partitionsRun(
  url: string,
  statement: SqlStatement,
): Promise<{ partitions: string[]; removed: boolean }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('begin');
    await client.query('set local plan_cache_mode = force_generic_plan');
    await client.query(`prepare probe as ${statement.text}`);
    const args = (statement.values as unknown[]).map((v) =>
      Array.isArray(v)
        ? client.escapeLiteral(`{${v.map((x) => JSON.stringify(x)).join(',')}}`)
        : v === null
          ? 'null'
          : typeof v === 'number'
            ? String(v)
            : client.escapeLiteral(String(v as string)),
    );
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, costs off, timing off, summary off) execute probe(${args.join(', ')})`,
    );
    await client.query('rollback');
    const lines = rows.map((r) => r['QUERY PLAN']);
    const partitions = new Set<string>();
    for (const line of lines) {
      // scans that ran (a ModifyTable lists every partition of its table, pruned or not, without figures)
      if (!/\(actual rows/.test(line)) continue;
      const m = /on ((event_outbox|outbox_deliveries|consumer_inbox)_(p\d{8}t\d{4}|default))/.exec(line);
      if (m) partitions.add(m[1]!);
    }
    return {
      partitions: [...partitions].sort(),
      removed: lines.some((l) => /Subplans Removed: [1-9]/.test(l)),
    };
  } finally {
    await client.end();
  }
}

/**
 * The claims' floor in the partitioned layout (docs/adr/1207-partitioned-history.md, "Amended 2026-12-06"): the
 * claims look only at events from the oldest range with unsettled work, so the executor prunes the older ranges;
 * an event below the floor (its id made by a clock days behind, or long before its commit) is still delivered —
 * by the next reading of the floor, which lowers it at once, or at worst by its tenant's full scan. On a database
 * converted here, with daily ranges from four days ago, whatever `OUTBOX_TEST_PARTITIONED` says.
 */
describe('the claims’ floor (partitioned layout)', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL], { runMigrations: true });
    await runSql(db.url, partitionedLayoutStatements(new Date(Date.now() - 4 * DAY)));
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await truncateOutbox(db);
    await db.sql(`delete from outbox_consumer_pauses`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function start(refreshMs: number): Promise<{ store: PgRelayStore; floor: ClaimFloor }> {
    t = await buildApp({
      url: db.url,
      providers: [ThingConsumers],
      outbox: { relay: { batchSize: BATCH, maxBatchSize: BATCH } },
      imports: [
        PolicySwitches.of({
          claimPositions: null,
          claimFloor: { marginMs: 60_000, refreshMs, fullScanMs: 3_600_000 },
        }),
      ],
    });
    const store = t.app.get(OUTBOX_STORE_PORT) as PgRelayStore;
    return { store, floor: store['floor'] as ClaimFloor };
  }

  /** Reads the floor until it has a bound (a reading proven by a later one), or fails after 10 s. */
  async function bounded(store: PgRelayStore, floor: ClaimFloor): Promise<string> {
    const deadline = Date.now() + 10_000;
    while (floor['bound'] === null) {
      if (Date.now() > deadline) throw new Error('the floor had no bound within 10 s');
      await store.readFloor(floor);
    }
    return floor['bound'] as string;
  }

  /** Runs the relay until `ids` were all handled by `CONSUMER`, or fails after 15 s. */
  async function relayUntil(ids: readonly string[]): Promise<void> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const handled = await effectIds(db, CONSUMER);
      if (ids.every((id) => handled.includes(id))) return;
      if (Date.now() > deadline) throw new Error(`not handled within 15 s: ${ids.join(', ')}`);
      await t!.relay.runOnce();
    }
  }

  /** Commits now an event whose id was made three days ago, pending; and one fanned out, its delivery due. */
  async function lateOldEvents(): Promise<{ pending: string; due: string }> {
    const old = Date.now() - 3 * DAY;
    const pending = uuidv7({ msecs: old });
    const due = uuidv7({ msecs: old + 1 });
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
       values ($1, $3, $4, '{}', 'pending', 0), ($2, $3, $4, '{}', 'processing', 1)`,
      [pending, due, TENANT, EVENT],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, $2, seq, 'pending' from event_outbox where id = $1`,
      [due, CONSUMER],
    );
    return { pending, due };
  }

  /** Reads the floor and runs the relay until `ids` were all handled by `CONSUMER`, or fails after 15 s. */
  async function readAndRelayUntil(
    store: PgRelayStore,
    floor: ClaimFloor,
    ids: readonly string[],
  ): Promise<void> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const handled = await effectIds(db, CONSUMER);
      const missing = ids.filter((id) => !handled.includes(id));
      if (missing.length === 0) return;
      if (Date.now() > deadline)
        throw new Error(`${missing.length} of ${ids.length} not handled within 15 s of readings and rounds`);
      await store.readFloor(floor);
      await t!.relay.runOnce();
    }
  }

  /** A busy tenant (its first claim, a full scan, behind it) and a floor with a bound; readings only when asked. */
  async function busyTenant(): Promise<{ store: PgRelayStore; floor: ClaimFloor }> {
    const started = await start(3_600_000);
    await enqueueIn(t!, { eventName: EVENT });
    await t!.relay.drain();
    await bounded(started.store, started.floor);
    return started;
  }

  /**
   * An event enqueued `daysAgo` (ten: before the conversion, the default partition; three: a range), fanned out, its
   * one delivery `failed` (due in three hours) or `dead`.
   */
  async function oldFannedOut(status: 'failed' | 'dead', daysAgo = 10): Promise<string> {
    const id = uuidv7({ msecs: Date.now() - daysAgo * DAY });
    const dead = status === 'dead';
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open, deliveries_dead)
       values ($1, $2, $3, '{}', $4, $5, $6)`,
      [id, TENANT, EVENT, dead ? 'failed' : 'processing', dead ? 0 : 1, dead ? 1 : 0],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, attempt_count,
                                      next_attempt_at, last_error)
       select id, tenant_id, $2, seq, $3, 5, now() + interval '3 hours', 'boom' from event_outbox where id = $1`,
      [id, CONSUMER, status],
    );
    const [{ n }] = (await db.sql<{ n: number }>(
      `select count(*)::int as n from outbox_deliveries_default where event_id = $1`,
      [id],
    )) as [{ n: number }];
    expect(n).toBe(daysAgo > 4 ? 1 : 0);
    return id;
  }

  it('prunes the ranges below the floor in each claim’s generic plan', async () => {
    await db.sql(`insert into outbox_consumers (name, event_patterns) values ($1, $2)`, [CONSUMER, [EVENT]]);
    const id = uuidv7();
    await db.sql(`insert into event_outbox (id, tenant_id, event_name, payload) values ($1, $2, $3, '{}')`, [
      id,
      TENANT,
      EVENT,
    ]);
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, 'other', seq, 'pending' from event_outbox`,
    );
    const [{ floor }] = (await db.sql<{ floor: string }>(
      `select outbox_claim_floor('10 minutes') as floor`,
    )) as [{ floor: string }];
    // at most the pending event's range: today's start, or ten minutes ago
    expect(floor <= id).toBe(true);
    expect(floor >= uuidv7({ msecs: Date.now() - DAY - 600_000 }).slice(0, 8)).toBe(true);
    const claim = {
      tenantId: TENANT,
      liveWithinMs: 60_000,
      limit: 10,
      leaseToken: NIL_UUID,
      leaseMs: 30_000,
    };
    const claims = (f: string): Record<string, SqlStatement> => ({
      fanOut: fanOutPendingEvents(names, {
        ...claim,
        inProcess: [CONSUMER],
        hosted: [CONSUMER],
        tenantConsumers: [],
        floor: f,
      }),
      lean: claimNewEvents(names, { ...claim, inProcess: [CONSUMER], floor: f }),
      due: claimDueDeliveries(names, { ...claim, consumers: ['other'], floor: f }),
    });
    const earliest = day(Date.now() - DAY);
    for (const [name, statement] of Object.entries(claims(floor))) {
      const bounded = await partitionsRun(db.url, statement);
      const full = await partitionsRun(db.url, claims(NIL_UUID)[name]!);
      // no range older than yesterday's (the floor's), the default partition kept (ids of no range)
      const older = bounded.partitions.filter(
        (p) => /_p\d{8}/.test(p) && p.replace(/.*_p(\d{8}).*/, '$1') < earliest,
      );
      expect({ name, older, removed: bounded.removed }).toEqual({ name, older: [], removed: true });
      // four ranges back, today, three ahead and the default: each table the full claim reads is cut by 3 or more
      expect(full.partitions.length - bounded.partitions.length).toBeGreaterThanOrEqual(3);
    }
  });

  it('delivers an event committed below the floor by its tenant’s full scan', async () => {
    const { store, floor } = await start(3_600_000);
    const first = await enqueueIn(t!, { eventName: EVENT });
    await relayUntil([first]);
    const bound = await bounded(store, floor);
    // a full scan of the tenant just ran; no reading comes before the next one (refreshMs: an hour)
    floor['fullScans'].set(TENANT, performance.now());
    const { pending, due } = await lateOldEvents();
    expect(bound > pending && bound > due).toBe(true);
    for (let i = 0; i < 3; i++) await t!.relay.runOnce();
    expect(await effectIds(db, CONSUMER)).not.toContain(pending);
    expect(await effectIds(db, CONSUMER)).not.toContain(due);
    // the tenant's full scan is due: it claims without the floor; and so is the due-tenant scans' sweep without it,
    // which lists the tenant (a scan from the floor does not: its only work lies below)
    floor['fullScans'].set(TENANT, performance.now() - 3_600_000);
    floor['scanSweepAt'] = performance.now() - 3_600_000;
    await relayUntil([pending, due]);
  });

  // Addendum "A floor reading from the open floor": an id made longer than the margin before its commit lies below
  // the open floor the readings start from; the next reading of every range (every fullScanMs) lowers the bound.
  it('delivers an event committed below the open floor at the next reading of every range, which lowers the bound at once', async () => {
    const { store, floor } = await start(0);
    const first = await enqueueIn(t!, { eventName: EVENT });
    await relayUntil([first]);
    await bounded(store, floor);
    // no full scan within the test (fullScanMs: an hour); a reading with every claim (refreshMs 0)
    floor['fullScans'].set(TENANT, performance.now());
    const { pending, due } = await lateOldEvents();
    // the reading of every range is due
    floor['allReadAt'] = -Infinity;
    await relayUntil([pending, due]);
    expect((floor['bound'] as string) <= pending).toBe(true);
  });

  // Review (2026-12-06): work the readings must see. The default partition (the old tables after the conversion:
  // every event enqueued before it, and until the first range starts a day later; every id of no range) is not
  // probed by outbox_claim_floor, while the claims filter it by `id >= floor` like any other partition: its work
  // older than the margin is left to the tenant's full scans, one batch per fullScanMs. With the floor null, these
  // pass. And a range's start is read from its name in UTC, whatever the session's time zone.
  it('drains a backlog the conversion left in the default partition in one drain', async () => {
    const ids = Array.from({ length: 3 * BATCH }, (_, i) => uuidv7({ msecs: Date.now() - 10 * DAY + i }));
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload)
       select id, $2, $3, '{}' from unnest($1::uuid[]) id`,
      [ids, TENANT, EVENT],
    );
    const [{ n }] = (await db.sql<{ n: number }>(`select count(*)::int as n from event_outbox_default`)) as [
      { n: number },
    ];
    expect(n).toBe(ids.length);
    const { store, floor } = await start(3_600_000);
    await bounded(store, floor);
    await t!.relay.drain();
    // the tenant's first claim (a full scan) takes a batch, the bounded ones none of the rest
    const handled = await effectIds(db, CONSUMER);
    expect(ids.filter((id) => !handled.includes(id))).toEqual([]);
  });

  it('claims a due retry and a replayed dead delivery of events of an older range at the next reading', async () => {
    const failed = await oldFannedOut('failed', 3);
    const dead = await oldFannedOut('dead', 3);
    const { store, floor } = await busyTenant();
    await db.sql(`update outbox_deliveries set next_attempt_at = now() where event_id = $1`, [failed]);
    expect(await t!.app.get(OutboxAdminService).replayEvent(TENANT, dead)).toBe(1);
    await readAndRelayUntil(store, floor, [failed, dead]);
  });

  it('claims a retry of an event of the default partition when it comes due, at the next reading', async () => {
    const { store, floor } = await busyTenant();
    const old = await oldFannedOut('failed');
    // its backoff ends now
    await db.sql(`update outbox_deliveries set next_attempt_at = now() where event_id = $1`, [old]);
    await readAndRelayUntil(store, floor, [old]);
  });

  it('delivers a dead delivery of an event of the default partition, replayed, at the next reading', async () => {
    const { store, floor } = await busyTenant();
    const old = await oldFannedOut('dead');
    expect(await t!.app.get(OutboxAdminService).replayEvent(TENANT, old)).toBe(1);
    await readAndRelayUntil(store, floor, [old]);
  });

  /** The reading's value now, as the relay would read it with `start`'s margin (a minute). */
  async function reading(): Promise<string> {
    const [{ floor }] = (await db.sql<{ floor: string }>(
      `select outbox_claim_floor('1 minute') as floor`,
    )) as [{ floor: string }];
    return floor;
  }

  /** Reads the floor until its bound is above `id`, or fails after 10 s (a raise waits for a second reading). */
  async function raisedAbove(store: PgRelayStore, floor: ClaimFloor, id: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!(floor['bound'] !== null && (floor['bound'] as string) > id)) {
      if (Date.now() > deadline)
        throw new Error(`the floor stayed at ${String(floor['bound'])}, not above ${id}`);
      await store.readFloor(floor);
    }
  }

  // Addendum "Work that waits does not hold the floor": work of an old range that is not claimable now — a paused
  // pair's delivery, a retry due in hours, an event scheduled for tomorrow — held the floor at its range, so every
  // claim of every tenant read every range from there on. The reading counts it once it is claimable again.
  it('rises above work that waits (paused, retried or scheduled later) and claims it at the next reading once due', async () => {
    const { store, floor } = await busyTenant();
    const other = TENANTS[1];
    const admin = t!.app.get(OutboxAdminService);
    expect(await admin.pauseConsumer(CONSUMER, { tenantId: other })).toBeTruthy();
    // three days old, in a range: a pending delivery of the paused pair, a retry due in three hours (TENANT), and an
    // event of TENANT scheduled for tomorrow
    const paused = uuidv7({ msecs: Date.now() - 3 * DAY });
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
       values ($1, $2, $3, '{}', 'processing', 1)`,
      [paused, other, EVENT],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, $2, seq, 'pending' from event_outbox where id = $1`,
      [paused, CONSUMER],
    );
    const retried = await oldFannedOut('failed', 3);
    const scheduled = uuidv7({ msecs: Date.now() - 3 * DAY + 2 });
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliver_at)
       values ($1, $2, $3, '{}', 'scheduled', now() + interval '1 day')`,
      [scheduled, TENANT, EVENT],
    );
    const oldest = [paused, retried, scheduled].sort()[2]!;
    // committed after the readings, below their open floor: the next reading of every range sees them
    floor['allReadAt'] = -Infinity;
    await store.readFloor(floor);
    // the reading and the relay's bound are past all three: the ranges of three days ago are pruned; the open
    // floor, where the readings start, stays at their range
    expect((await reading()) > oldest).toBe(true);
    await raisedAbove(store, floor, oldest);
    expect((floor['open'] as { from: string }).from <= [paused, retried, scheduled].sort()[0]!).toBe(true);
    // neither tenant's claims go without the floor within the test (their full scans just ran)
    floor['fullScans'].set(TENANT, performance.now());
    floor['fullScans'].set(other, performance.now());
    // resumed, and the retry's backoff over: the next reading counts both and lowers the bound at once
    expect(await admin.resumeConsumer(CONSUMER, { tenantId: other })).toBe(true);
    await db.sql(`update outbox_deliveries set next_attempt_at = now() where event_id = $1`, [retried]);
    expect((await reading()) <= paused).toBe(true);
    await readAndRelayUntil(store, floor, [paused, retried]);
  });

  it('rises above a paused consumer’s backlog larger than its probe, and counts it again once resumed', async () => {
    // 150 pending deliveries of a consumer paused for every tenant, three days back: more than the reading's
    // probe looks at in a range's due index (100), which it passes by without walking the rest
    await db.sql(`insert into outbox_consumer_pauses (consumer_name, tenant_id) values ($1, null)`, [
      CONSUMER,
    ]);
    const old = Date.now() - 3 * DAY;
    const ids = Array.from({ length: 150 }, (_, i) => uuidv7({ msecs: old + i }));
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
       select id, $2, $3, '{}', 'processing', 1 from unnest($1::uuid[]) id`,
      [ids, TENANT, EVENT],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
       select id, tenant_id, $1, seq, 'pending' from event_outbox`,
      [CONSUMER],
    );
    expect((await reading()) > ids[149]!).toBe(true);
    // resumed: the range holds the floor again
    await db.sql(`delete from outbox_consumer_pauses`);
    expect((await reading()) <= ids[0]!).toBe(true);
  });

  it.each([21, 22, 23, 24])(
    'reads what the form of sql/0034 reads on a random mix of work in the ranges and the default (seed %i)',
    async (seed) => {
      // the form that planned every range at each reading (sql/0034), beside the current one under another name
      const previous = readFileSync(
        join(__dirname, '../../libs/outbox/sql/0034-outbox-claim-floor-claimable.up.sql'),
        'utf8',
      )
        .replace(/^--.*$/gm, '')
        .replace(/public\.outbox_claim_floor\(/g, 'public.outbox_claim_floor_0034(')
        .replace(/^(revoke|grant) .*$/gm, '');
      await db.sql(previous);
      try {
        const draw = mulberry32(seed);
        const next = (): number => draw() / 2 ** 32;
        const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
        const consumers = [CONSUMER, 'other.consumer'];
        // readings held down by work (a range's start, or the nil id for the default partition's)
        let held = 0;
        for (let round = 0; round < 6; round++) {
          // a few more events each round, most settled: ten days back (the default partition), in the four
          // daily ranges, or now (within the margins); their deliveries' statuses and retries at random
          const events = Array.from({ length: 12 }, () => ({
            id: uuidv7({ msecs: Date.now() - pick([10, 4, 3, 2, 1, 0]) * DAY - Math.floor(next() * DAY) }),
            tenant: pick(TENANTS),
            status: pick([
              'published',
              'published',
              'pending',
              'processing',
              'processing',
              'scheduled',
              'failed',
            ]),
            deliverAt: pick(['-1 hour', '30 seconds', '2 minutes', '1 day']),
          }));
          await db.sql(
            `insert into event_outbox (id, tenant_id, event_name, payload, status, deliver_at)
             select e.id, e.tenant, $5, '{}', e.status,
                    case when e.status = 'scheduled' then now() + e.deliver_at::interval end
               from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[]) e(id, tenant, status, deliver_at)`,
            [
              events.map((e) => e.id),
              events.map((e) => e.tenant),
              events.map((e) => e.status),
              events.map((e) => e.deliverAt),
              EVENT,
            ],
          );
          const deliveries = events
            .filter((e) => e.status === 'processing')
            .flatMap((e) =>
              consumers
                .filter(() => next() < 0.7)
                .map((consumer) => ({
                  id: e.id,
                  consumer,
                  status: pick(['delivered', 'delivered', 'pending', 'failed', 'processing', 'dead']),
                  nextAttempt: pick(['-1 hour', '30 seconds', '2 minutes', '1 day']),
                })),
            );
          await db.sql(
            `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, next_attempt_at)
             select d.id, e.tenant_id, d.consumer, e.seq, d.status, now() + d.next_attempt::interval
               from unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) d(id, consumer, status, next_attempt)
               join event_outbox e on e.id = d.id`,
            [
              deliveries.map((d) => d.id),
              deliveries.map((d) => d.consumer),
              deliveries.map((d) => d.status),
              deliveries.map((d) => d.nextAttempt),
            ],
          );
          // a pause now and then: of a consumer for one tenant or all, until later or already over
          await db.sql(`delete from outbox_consumer_pauses`);
          if (next() < 0.5)
            await db.sql(
              `insert into outbox_consumer_pauses (consumer_name, tenant_id, resumes_at)
               values ($1, $2, now() + $3::interval)`,
              [
                pick(consumers),
                next() < 0.5 ? null : pick(TENANTS),
                pick(['1 hour', '-1 hour', '30 seconds']),
              ],
            );
          // and half the events pending or scheduled settled, half the deliveries pending or failed delivered, so
          // that the oldest busy range moves and ranges busy through one kind of work alone are common
          for (const [table, open, settled] of [
            ['event_outbox', `('pending', 'scheduled')`, 'published'],
            ['outbox_deliveries', `('pending', 'failed')`, 'delivered'],
          ] as const)
            await db.sql(
              `update ${table} set status = '${settled}' where id in (
                 select id from ${table} where status in ${open}
                  order by md5(id::text || $1::text)
                  limit (select count(*) / 2 + 1 from ${table} where status in ${open}))`,
              [round + seed],
            );
          for (const margin of ['1 minute', '1 day', '2 days 12 hours', '5 days', '30 days']) {
            const [both] = await db.sql<{
              now: string;
              was: string;
              recent: string;
              all: string;
              open: string;
            }>(
              `select outbox_claim_floor($1::interval) as now, outbox_claim_floor_0034($1::interval) as was,
                      outbox_uuid_at(now() - $1::interval) as recent, a.floor as all, a.open_floor as open
                 from outbox_claim_floor($1::interval, null, null) a`,
              [margin],
            );
            expect({ round, margin, floor: both!.now }).toEqual({ round, margin, floor: both!.was });
            // the three-argument form, reading every range, gives the same floor, and its open floor is at or below
            expect({ round, margin, floor: both!.all }).toEqual({ round, margin, floor: both!.was });
            expect({ round, margin, open: both!.open <= both!.all }).toEqual({ round, margin, open: true });
            if (both!.now < both!.recent) held++;
          }
        }
        expect(held).toBeGreaterThan(0);
      } finally {
        await db.sql(`drop function outbox_claim_floor_0034(interval)`);
      }
    },
  );

  it('probes a settled range through its partial indexes, whatever the statistics its plan was made with', async () => {
    // a range full of pending events when the session's plan of the reading is made (analyzed: the planner knows),
    // settled before the next readings: a plan that chose the range's key for the id bounds walks every event
    const old = Date.now() - 3 * DAY;
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status)
       select outbox_uuid_at(to_timestamp(($1::bigint + g) / 1000.0))::text::uuid, $2, $3, '{}', 'pending'
         from generate_series(1, 5000) g`,
      [old, TENANT, EVENT],
    );
    await db.sql(`analyze event_outbox`);
    const session = new Client({ connectionString: db.url });
    await session.connect();
    try {
      const reading = `select outbox_claim_floor('1 minute')`;
      await session.query(reading);
      await db.sql(`update event_outbox set status = 'published' where status = 'pending'`);
      // twice: the first reading after the update marks the index entries of the old versions dead
      await session.query(reading);
      await session.query(reading);
      const { rows } = await session.query<{ 'QUERY PLAN': string }>(
        `explain (analyze, buffers, costs off, timing off, summary off) ${reading}`,
      );
      const top = rows.map((r) => r['QUERY PLAN']).find((line) => /Buffers:/.test(line)) ?? '';
      const buffers = [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
      // a few per range and probe (nine ranges, four probes), not one per event
      expect(buffers).toBeLessThan(300);
    } finally {
      await session.end();
    }
  });

  it('reads a range’s start in UTC whatever the session’s time zone (a range at a local time that does not exist)', async () => {
    // an hourly range named for 2026-03-08 02:00 UTC: 02:00 on that day does not exist in New York (clocks go
    // from 02:00 to 03:00), so its name read as a local time gives 03:00
    const lo = '2026-03-08 02:00:00+00';
    for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox'])
      await db.sql(`select outbox_create_range($1::regclass, $2::timestamptz, interval '1 hour')`, [
        table,
        lo,
      ]);
    await db.sql(`alter database ${db.name} set timezone = 'America/New_York'`);
    try {
      const { store, floor } = await busyTenant();
      // enqueued at 02:30 UTC that day (a host's clock, a backfill of history): pending in that range
      const old = uuidv7({ msecs: Date.parse('2026-03-08T02:30:00Z') });
      await db.sql(
        `insert into event_outbox (id, tenant_id, event_name, payload) values ($1, $2, $3, '{}')`,
        [old, TENANT, EVENT],
      );
      // committed below the readings' open floor: the reading of every range
      floor['allReadAt'] = -Infinity;
      await readAndRelayUntil(store, floor, [old]);
    } finally {
      await db.sql(`alter database ${db.name} reset timezone`);
      for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox'])
        await db.sql(`drop table ${table}_p20260308t0200`);
    }
  });
  // Addendum "A floor reading from the open floor": a reading probes the ranges from the open floor of the one before
  // it (the oldest range holding open work), not every range; what brings work back below it — a replay of a dead
  // delivery, a backfill — writes where (outbox_reopened), and the next reading starts from there.

  /** The open floor and `xmin` the next reading of `floor` starts from. */
  function openOf(floor: ClaimFloor): { from: string; since: string } {
    const open = floor['open'] as { from: string; since: string } | null;
    if (open === null) throw new Error('the floor has no open floor');
    return open;
  }

  /** The shared buffers (hit + read) of one call of the reading on `session`, called twice before (plans made). */
  async function readingBuffers(
    session: Client,
    open: { from: string; since: string } | null,
  ): Promise<number> {
    const args = open === null ? 'null, null' : `'${open.from}'::uuid, '${open.since}'::xid8`;
    const reading = `select * from outbox_claim_floor('1 minute', ${args})`;
    await session.query(reading);
    await session.query(reading);
    const { rows } = await session.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, buffers, costs off, timing off, summary off) ${reading}`,
    );
    const top = rows.map((r) => r['QUERY PLAN']).find((line) => /Buffers:/.test(line)) ?? '';
    return [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  }

  it('reads from the open floor in as many buffers with 90 more settled ranges below it', async () => {
    const { store, floor } = await busyTenant();
    const session = new Client({ connectionString: db.url });
    await session.connect();
    // 90 hourly ranges, 40 days back, empty (settled)
    const starts = Array.from({ length: 90 }, (_, i) => new Date(Date.now() - 40 * DAY + i * 3_600_000));
    for (const at of starts) at.setUTCMinutes(0, 0, 0);
    try {
      const before = await readingBuffers(session, openOf(floor));
      const allBefore = await readingBuffers(session, null);
      for (const at of starts)
        for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox'])
          await db.sql(`select outbox_create_range($1::regclass, $2::timestamptz, interval '1 hour')`, [
            table,
            at.toISOString(),
          ]);
      await store.readFloor(floor);
      const after = await readingBuffers(session, openOf(floor));
      const allAfter = await readingBuffers(session, null);
      // from the open floor: the same few ranges (today's); every range: a few buffers more per range
      expect({ before, after: Math.min(after, before + 5) }).toEqual({ before, after });
      expect(allAfter - allBefore).toBeGreaterThan(90);
    } finally {
      await session.end();
      for (const at of starts)
        for (const table of ['event_outbox', 'outbox_deliveries', 'consumer_inbox'])
          await db.sql(
            `drop table ${table}_p${at.toISOString().slice(0, 13).replace(/[-]/g, '').replace('T', 't')}00`,
          );
    }
  });

  it('delivers a dead delivery of a range with no open work, replayed, at the next reading from the open floor', async () => {
    const dead = await oldFannedOut('dead', 3);
    const { store, floor } = await busyTenant();
    // the readings start above the dead delivery's range (dead is not open work) and read every range only hourly
    expect(openOf(floor).from > dead).toBe(true);
    const allReadAt = floor['allReadAt'] as number;
    floor['fullScans'].set(TENANT, performance.now());
    expect(await t!.app.get(OutboxAdminService).replayEvent(TENANT, dead)).toBe(1);
    await readAndRelayUntil(store, floor, [dead]);
    expect(floor['allReadAt']).toBe(allReadAt);
  });

  it('delivers a backfill into a range with no open work at the next reading from the open floor', async () => {
    // an event of three days ago, settled: delivered to the other consumer, none for CONSUMER (it joined late)
    const old = uuidv7({ msecs: Date.now() - 3 * DAY });
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open, published_at)
       values ($1, $2, $3, '{}', 'published', 0, now())`,
      [old, TENANT, EVENT],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, processed_at)
       select id, tenant_id, 'memory', seq, 'delivered', now() from event_outbox where id = $1`,
      [old],
    );
    const { store, floor } = await busyTenant();
    expect(openOf(floor).from > old).toBe(true);
    const allReadAt = floor['allReadAt'] as number;
    floor['fullScans'].set(TENANT, performance.now());
    const report = await t!.app
      .get(OutboxAdminService)
      .backfill(CONSUMER, { tenantId: TENANT, since: new Date(Date.now() - 4 * DAY), pauseMs: 0 });
    expect(report.totalCreated).toBe(1);
    await readAndRelayUntil(store, floor, [old]);
    expect(floor['allReadAt']).toBe(allReadAt);
  });

  it('finds from the open floor an event whose id was made within the margin before the reading and committed after it', async () => {
    await busyTenant();
    // a reading with a margin of a minute: no open work older than it, so the open floor is a minute ago
    const [first] = await db.sql<{ open: string; xmin: string }>(
      `select f.open_floor as open, pg_snapshot_xmin(pg_current_snapshot())::text as xmin
         from outbox_claim_floor('1 minute', null, null) f`,
    );
    // an id made 50 s ago (within the margin), committed now; read as if 20 s had gone by (a margin of 30 s)
    const late = uuidv7({ msecs: Date.now() - 50_000 });
    expect(late > first!.open).toBe(true);
    await db.sql(`insert into event_outbox (id, tenant_id, event_name, payload) values ($1, $2, $3, '{}')`, [
      late,
      TENANT,
      EVENT,
    ]);
    const [next] = await db.sql<{ floor: string }>(
      `select f.floor from outbox_claim_floor('30 seconds', $1::uuid, $2::xid8) f`,
      [first!.open, first!.xmin],
    );
    expect(next!.floor <= late).toBe(true);
  });
});
