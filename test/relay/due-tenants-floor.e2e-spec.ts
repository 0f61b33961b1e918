import { v7 as uuidv7 } from 'uuid';
import { OUTBOX_STORE_PORT } from '../../libs/outbox/src/store/outbox-store.port';
import type { PgRelayStore } from '../../libs/outbox/src/store/pg-relay-store';
import type { ClaimFloor } from '../../libs/outbox/src/store/claim-floor';
import type { ClaimPositions } from '../../libs/outbox/src/store/claim-positions';
import { dueTenants, type DuePositions } from '../../libs/outbox/src/store/sql/due-tenants';
import { SERVER_START } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { partitionedLayoutSql } from '../../libs/outbox/src/maintenance/partitioning';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { runSql } from '../support/template-database';
import { buildApp, type TestApp } from '../support/build-app';
import { EFFECTS_TABLE_SQL, TENANTS, ThingConsumers, effectIds, enqueueIn } from '../support/outbox-fixture';
import { PolicySwitches } from '../support/policy-switches';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const EVENT = 'test.thing.created.v1';
const CONSUMER = 'ThingConsumers.writeRow';
const names = outboxNames();
/** TENANTS in uuid order: a tenant with work now, one whose only work lies days back, one with a retry due now. */
const [BUSY, OLD, THIRD] = [TENANTS[0], TENANTS[1], TENANTS[2]];
/** No claim positions: every tenant from its start (the relay's first scan). */
const NONE: DuePositions = { tenants: [], seqs: [], server: '', leasesSince: null };

interface Due {
  tenant_id: string;
  has_new: boolean;
  has_due: boolean;
}

/**
 * The due-tenant scan from the claims' floor (docs/adr/1207-partitioned-history.md, addendum "The due-tenant scan
 * stops at the floor"): `outbox_due_tenants`' seven-argument form probes the events and deliveries from the floor
 * only, so the executor prunes the settled ranges below it and the scan's cost does not grow with them; what lies
 * below the floor is listed by the relay's sweeps without it, at least once per `fullScanMs`, and claimed at that
 * visit. On a database converted here to 100 hourly ranges (96 hours back, 3 ahead), whatever
 * `OUTBOX_TEST_PARTITIONED` says.
 */
describe('the due-tenant scan from the claims’ floor (partitioned layout, 100 hourly ranges)', () => {
  let db: TestDatabase;
  let server: string;
  let t: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL], { runMigrations: true });
    const start = new Date(Date.now() - 96 * HOUR);
    start.setUTCMinutes(0, 0, 0);
    await runSql(
      db.url,
      partitionedLayoutSql('public', { width: '1 hour', ahead: 3, start: start.toISOString() })
        .split('\n')
        .filter((line) => line.trim() !== '' && !line.startsWith('--')),
    );
    [{ server } = { server: '' }] = await db.sql<{ server: string }>(`select ${SERVER_START} as server`);
  }, 60_000);
  afterEach(async () => {
    await t?.close();
    t = undefined;
    // rows, not the partitions: truncating 300 of them takes seconds
    for (const table of ['outbox_deliveries', 'outbox_event_leases', 'event_outbox'])
      await db.sql(`delete from ${table}`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** Inserts an event of `tenantId` whose id was made at `msecs`; resolves with its id. */
  async function event(tenantId: string, msecs: number, status = 'pending', open = 0): Promise<string> {
    const id = uuidv7({ msecs });
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
       values ($1, $2, $3, '{}', $4, $5)`,
      [id, tenantId, EVENT, status, open],
    );
    return id;
  }

  /** A delivery of `eventId`: `pending` and due, or `processing` with its lease expired. */
  async function delivery(
    eventId: string,
    status: 'pending' | 'processing',
    consumer = CONSUMER,
  ): Promise<void> {
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status, next_attempt_at,
                                      lease_expires_at)
       select id, tenant_id, $2, seq, $3, now() - interval '1 second',
              case when $3 = 'processing' then now() - interval '1 second' end
         from event_outbox where id = $1`,
      [eventId, consumer, status],
    );
  }

  /** The floor as the relay reads it (a margin of 10 minutes). */
  async function readFloor(): Promise<string> {
    const [{ floor }] = (await db.sql<{ floor: string }>(
      `select outbox_claim_floor('10 minutes') as floor`,
    )) as [{ floor: string }];
    return floor;
  }

  function scan(floor: string, positions: DuePositions = NONE): Promise<Due[]> {
    const statement = dueTenants(names, 100, null, positions, floor);
    return db.sql<Due>(statement.text, [...statement.values]);
  }

  /** Shared buffers one call of the scan touched (hit and read), its statements inside included. */
  async function buffers(floor: string): Promise<number> {
    const statement = dueTenants(names, 100, null, NONE, floor);
    const plan = await db.sql<Record<string, string>>(`explain (analyze, buffers) ${statement.text}`, [
      ...statement.values,
    ]);
    const line = plan.map((row) => Object.values(row)[0]!).find((l) => /Buffers: shared/.test(l)) ?? '';
    const count = (kind: string): number => Number(new RegExp(`${kind}=(\\d+)`).exec(line)?.[1] ?? 0);
    return count('hit') + count('read');
  }

  it('reads as few buffers with 96 settled ranges below the floor as its ranges from the floor cost', async () => {
    // settled history in every past range, work in the current one
    for (let h = 96; h >= 1; h--) await event(BUSY, Date.now() - h * HOUR, 'published');
    for (let i = 0; i < 20; i++) await event(BUSY, Date.now());
    const now = await event(THIRD, Date.now(), 'processing', 1);
    await delivery(now, 'pending');
    await db.sql('analyze');
    const floor = await readFloor();
    expect(floor > uuidv7({ msecs: Date.now() - 2 * HOUR })).toBe(true);
    const listed = [
      { tenant_id: BUSY, has_new: true, has_due: false },
      { tenant_id: THIRD, has_new: false, has_due: true },
    ];
    expect(await scan(floor)).toEqual(listed);
    expect(await scan(NIL_UUID)).toEqual(listed);
    // twice each: the first call of a session also plans the function's statements
    await buffers(floor);
    await buffers(NIL_UUID);
    const bounded = await buffers(floor);
    const unbounded = await buffers(NIL_UUID);
    // without the floor, each step of the walk probes every range's partial index (808 buffers here, PostgreSQL
    // 15, and so did the relay's scan before it took the floor); from it, the current range's, the three ahead and
    // the default partitions' (40)
    expect(unbounded).toBeGreaterThan(400);
    expect(bounded).toBeLessThan(100);
  });

  it('lists only the tenants with due work from the floor; without it, every one', async () => {
    const floor = await readFloor();
    // now: a pending event of BUSY; a due retry of THIRD
    await event(BUSY, Date.now());
    await delivery(await event(THIRD, Date.now(), 'processing', 1), 'pending');
    // days back, below the floor: OLD's pending event, a due retry, a delivery whose lease expired
    await event(OLD, Date.now() - 3 * DAY);
    await delivery(await event(OLD, Date.now() - 2 * DAY, 'processing', 1), 'pending');
    await delivery(await event(OLD, Date.now() - 2 * DAY, 'processing', 1), 'processing');
    const [{ seq }] = (await db.sql<{ seq: string }>(
      `select min(seq)::text as seq from event_outbox where tenant_id = $1`,
      [OLD],
    )) as [{ seq: string }];
    const bounded = [
      { tenant_id: BUSY, has_new: true, has_due: false },
      { tenant_id: THIRD, has_new: false, has_due: true },
    ];
    expect(await scan(floor)).toEqual(bounded);
    // OLD positioned at its first event: its probe from the position stops at the floor too
    const positioned = { tenants: [OLD, BUSY], seqs: [seq, '1'], server, leasesSince: null };
    expect(await scan(floor, positioned)).toEqual(bounded);
    const every = [bounded[0], { tenant_id: OLD, has_new: true, has_due: true }, bounded[1]];
    expect(await scan(NIL_UUID)).toEqual(every);
    expect(await scan(NIL_UUID, positioned)).toEqual(every);
    // the seven-argument form from the nil id lists what the six-argument form lists
    const seven = await db.sql<Due>(
      `select tenant_id, has_new, has_due from outbox_due_tenants(100, null, $1::uuid[], $2::bigint[], $3, null, $4)`,
      [positioned.tenants, positioned.seqs, server, NIL_UUID],
    );
    expect(seven).toEqual(every);
  });

  it('keeps the six-argument form’s security: definer, its settings, execute for outbox_relay only', async () => {
    const [fn] = await db.sql<{
      definer: boolean;
      config: string[];
      relay: boolean;
      app: boolean;
      open: boolean;
    }>(
      `select p.prosecdef as definer, p.proconfig as config,
              has_function_privilege('outbox_relay', p.oid, 'execute') as relay,
              has_function_privilege('outbox_app', p.oid, 'execute') as app,
              has_function_privilege('public', p.oid, 'execute') as open
         from pg_proc p
        where p.oid = 'outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz, uuid)'::regprocedure`,
    );
    expect(fn).toEqual({
      definer: true,
      config: ['search_path=pg_catalog, public', 'plan_cache_mode=force_generic_plan'],
      relay: true,
      app: false,
      open: false,
    });
  });

  it('counts a scan as an idle tenant’s net only without the floor (a scan from it did not look below)', async () => {
    t = await buildApp({
      url: db.url,
      providers: [ThingConsumers],
      imports: [
        PolicySwitches.of({
          claimPositions: { fullScanMs: 3_600_000, settleMs: 0 },
          claimFloor: { marginMs: 60_000, refreshMs: 3_600_000, fullScanMs: 3_600_000 },
        }),
      ],
    });
    const store = t.app.get(OUTBOX_STORE_PORT) as PgRelayStore;
    const floor = store['floor'] as ClaimFloor;
    const positions = store['positions'] as ClaimPositions;
    const state = (): { fullScanAt: number; startScanAt: number } => positions['tenants'].get(BUSY)!;
    const deadline = Date.now() + 10_000;
    while (!positions['tenants'].get(BUSY) || floor['bound'] === null) {
      if (Date.now() > deadline) throw new Error('no position and no floor within 10 s');
      await enqueueIn(t, { eventName: EVENT, tenantId: BUSY });
      await t.relay.drain();
      await store.readFloor(floor);
    }
    // BUSY goes idle; its net and its scan from the start are due
    const due = performance.now() - 3_600_000;
    Object.assign(state(), { fullScanAt: due, startScanAt: due });
    expect(await store.dueTenants({ limit: 100, after: null })).toEqual([]);
    // from the floor: an event of BUSY below it and below its position was not looked for
    expect(state()).toMatchObject({ fullScanAt: due, startScanAt: due });
    floor['scanSweepAt'] = performance.now() - 3_600_000;
    const sweep = performance.now();
    expect(await store.dueTenants({ limit: 100, after: null })).toEqual([]);
    expect(state().fullScanAt).toBeGreaterThanOrEqual(sweep);
    expect(state().startScanAt).toBeGreaterThanOrEqual(sweep);
  });

  it('visits a tenant whose only work lies below the floor at the scans’ sweep without it, and claims it then', async () => {
    t = await buildApp({
      url: db.url,
      providers: [ThingConsumers],
      imports: [
        PolicySwitches.of({ claimFloor: { marginMs: 60_000, refreshMs: 3_600_000, fullScanMs: 3_600_000 } }),
      ],
    });
    const store = t.app.get(OUTBOX_STORE_PORT) as PgRelayStore;
    const floor = store['floor'] as ClaimFloor;
    const first = await enqueueIn(t, { eventName: EVENT, tenantId: BUSY });
    await t.relay.drain();
    expect(await effectIds(db, CONSUMER)).toContain(first);
    const deadline = Date.now() + 10_000;
    while (floor['bound'] === null) {
      if (Date.now() > deadline) throw new Error('the floor had no bound within 10 s');
      await store.readFloor(floor);
    }
    // OLD's full claim just ran (no other within the test: fullScanMs an hour), its work committed since, days back
    floor['fullScans'].set(OLD, performance.now());
    const pending = await event(OLD, Date.now() - 3 * DAY);
    const due = await event(OLD, Date.now() - 3 * DAY + 1, 'processing', 1);
    await delivery(due, 'pending');
    expect((floor['bound'] as string) > pending).toBe(true);
    expect(await store.dueTenants({ limit: 100, after: null })).toEqual([]);
    for (let i = 0; i < 3; i++) await t.relay.runOnce();
    expect(await effectIds(db, CONSUMER)).not.toContain(pending);
    // the scans' sweep is due: it lists OLD, whose claims at that visit go without the floor
    floor['scanSweepAt'] = performance.now() - 3_600_000;
    const ends = Date.now() + 15_000;
    for (;;) {
      const handled = await effectIds(db, CONSUMER);
      if (handled.includes(pending) && handled.includes(due)) break;
      if (Date.now() > ends) throw new Error('not handled within 15 s of rounds');
      await t.relay.runOnce();
    }
  });
});
