import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OUTBOX_STORE_PORT } from '../../libs/outbox/src/store/outbox-store.port';
import type { PgRelayStore } from '../../libs/outbox/src/store/pg-relay-store';
import type { ClaimPositions } from '../../libs/outbox/src/store/claim-positions';
import { dueTenants, type DuePositions } from '../../libs/outbox/src/store/sql/due-tenants';
import { SERVER_START } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { buildApp, type TestApp } from '../support/build-app';
import { holdSnapshot } from '../support/held-snapshot';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, TENANT, TENANTS, truncateOutbox } from '../support/outbox-fixture';
import { PolicySwitches } from '../support/policy-switches';

const EVENT = 'test.due-past-settled.v1';
const names = outboxNames();
/** TENANTS in uuid order: 5b0e… < a1b2… < b2c3… */
const [MIDDLE, UPPER, HIGHEST] = [TENANTS[0], TENANTS[1], TENANTS[2]];

interface Due {
  tenant_id: string;
  has_new: boolean;
  has_due: boolean;
}

/**
 * The due-tenant scan from the relay's claim positions (docs/adr/1206-claims-that-start-past-the-settled.md,
 * addendum on the due-tenant scan): `outbox_due_tenants`' six-argument form checks each positioned tenant from
 * its position and looks for the others between them, so the index entries of events settled under a held
 * snapshot are not walked; a tenant whose full scan is due is looked for from its start.
 */
describe('due-tenant scan past the settled', () => {
  let db: TestDatabase;
  let server: string;
  let holder: Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    [{ server } = { server: '' }] = await db.sql<{ server: string }>(`select ${SERVER_START} as server`);
  });
  afterEach(async () => {
    await holder?.end();
    holder = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  function scan(positions: DuePositions | null, limit = 100, after: string | null = null): Promise<Due[]> {
    const statement = dueTenants(names, limit, after, positions);
    return db.sql<Due>(statement.text, [...statement.values]);
  }

  function at(entries: [string, bigint][], on = server, leasesSince: string | null = null): DuePositions {
    return {
      tenants: entries.map(([t]) => t),
      seqs: entries.map(([, s]) => s.toString()),
      server: on,
      leasesSince,
    };
  }

  async function dbNow(): Promise<string> {
    const [row] = await db.sql<{ now: string }>(`select now()::text as now`);
    return row!.now;
  }

  /** Inserts `n` events of `tenantId` in `status`; resolves with the highest `seq`. */
  async function insert(tenantId: string, n: number, status = 'pending'): Promise<bigint> {
    const [row] = await db.sql<{ seq: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload, status)
       select gen_random_uuid(), $1, $2, '{}'::jsonb, $3 from generate_series(1, $4::int)
       returning seq::text`,
      [tenantId, EVENT, status, n],
    );
    const [max] = await db.sql<{ seq: string }>(
      `select max(seq)::text as seq from event_outbox where tenant_id = $1`,
      [tenantId],
    );
    return BigInt(max?.seq ?? row!.seq);
  }

  /**
   * Settles `n` events of `tenantId` as the lean claim and its outcome do (a lease inserted and deleted, the event
   * `published`); resolves with the position past them.
   */
  async function settle(tenantId: string, n: number): Promise<bigint> {
    const last = await insert(tenantId, n);
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() - interval '1 minute' from event_outbox
        where tenant_id = $1 and status = 'pending'`,
      [tenantId],
    );
    await db.sql(`delete from outbox_event_leases where tenant_id = $1`, [tenantId]);
    await db.sql(
      `update event_outbox set status = 'published', published_at = now() where tenant_id = $1 and status = 'pending'`,
      [tenantId],
    );
    return last + 1n;
  }

  /** Shared buffers the scan touched (hit and read), by EXPLAIN (ANALYZE, BUFFERS). */
  async function buffers(positions: DuePositions | null): Promise<number> {
    const statement = dueTenants(names, 100, null, positions);
    const plan = await db.sql<Record<string, string>>(`explain (analyze, buffers) ${statement.text}`, [
      ...statement.values,
    ]);
    const line = plan.map((row) => Object.values(row)[0]!).find((l) => /Buffers: shared/.test(l)) ?? '';
    const count = (kind: string): number => Number(new RegExp(`${kind}=(\\d+)`).exec(line)?.[1] ?? 0);
    return count('hit') + count('read');
  }

  it('lists a positioned tenant for pending events from its position, not below it', async () => {
    const past = await settle(MIDDLE, 10);
    await insert(MIDDLE, 1);
    expect(await scan(at([[MIDDLE, past]]))).toEqual([{ tenant_id: MIDDLE, has_new: true, has_due: false }]);
    // a pending event below the position only (the case the minute's full scan is for): not from the position,
    // but the two-argument form (the relay's call when the tenant's full scan is due) lists it
    expect(await scan(at([[MIDDLE, past + 1n]]))).toEqual([]);
    expect(await scan(null)).toEqual([{ tenant_id: MIDDLE, has_new: true, has_due: false }]);
  });

  it('finds the tenants without a position between and around those with one', async () => {
    for (const tenant of [NIL_UUID, MIDDLE, UPPER, HIGHEST]) await insert(tenant, 1);
    const high = (await insert(MIDDLE, 1)) + 1n;
    // MIDDLE is positioned past its events, HIGHEST at 0 (the same as none); the nil tenant is an end of the order
    const listed = await scan(
      at([
        [MIDDLE, high],
        [HIGHEST, 0n],
      ]),
    );
    expect(listed.map((d) => d.tenant_id)).toEqual([NIL_UUID, UPPER, HIGHEST]);
    // in the order the two-argument form gives, from after `after`, up to the limit
    const both = [await scan(null, 2, NIL_UUID), await scan(at([[MIDDLE, 1n]]), 2, NIL_UUID)];
    expect(both[1]).toEqual(both[0]);
    expect(both[0]!.map((d) => d.tenant_id)).toEqual([MIDDLE, UPPER]);
  });

  it('ignores positions read on another server', async () => {
    const past = await settle(MIDDLE, 3);
    await db.sql(
      `insert into event_outbox (id, seq, tenant_id, event_name, payload) overriding system value
       values (gen_random_uuid(), $1, $2, $3, '{}'::jsonb)`,
      [String(past - 2n), MIDDLE, EVENT],
    );
    expect(await scan(at([[MIDDLE, past]]))).toEqual([]);
    expect(await scan(at([[MIDDLE, past]], 'another server'))).toEqual([
      { tenant_id: MIDDLE, has_new: true, has_due: false },
    ]);
  });

  it('lists a tenant with an expired event lease: a positioned one, if it expired since the last scan', async () => {
    const past = await settle(MIDDLE, 1);
    await insert(MIDDLE, 1, 'processing');
    await insert(UPPER, 1, 'processing');
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() - interval '1 minute' from event_outbox where status = 'processing'`,
    );
    const both = [
      { tenant_id: MIDDLE, has_new: true, has_due: false },
      { tenant_id: UPPER, has_new: true, has_due: false },
    ];
    expect(await scan(null)).toEqual(both);
    expect(await scan(at([[MIDDLE, past]]))).toEqual(both);
    // MIDDLE's lease expired before the last scan (which listed it): not again; UPPER has no position
    const since = await dbNow();
    expect(await scan(at([[MIDDLE, past]], server, since))).toEqual([both[1]]);
    await db.sql(
      `update outbox_event_leases set lease_expires_at = $1::timestamptz - interval '0.5 second' where tenant_id = $2`,
      [since, MIDDLE],
    );
    // a second early: a lease that expired just before the last scan may have been committed after it
    expect(await scan(at([[MIDDLE, past]], server, since))).toEqual(both);
  });

  it('reads a bounded number of buffers under a held snapshot, whatever was settled since', async () => {
    holder = await holdSnapshot(db.url);
    const past = await settle(MIDDLE, 50_000);
    await insert(MIDDLE, 20);
    // the last scan a moment ago: the leases of settled events expired a minute ago
    const positions = at([[MIDDLE, past]], server, await dbNow());
    expect(await scan(positions)).toEqual([{ tenant_id: MIDDLE, has_new: true, has_due: false }]);
    // twice each: the first execution also plans the function's statements
    await buffers(null);
    await buffers(positions);
    const before = await buffers(null);
    const after = await buffers(positions);
    // the two-argument form walks the 50,000 dead entries of the pending index and of the leases' expiry index;
    // the positioned form probes each partition's index once (a plain table has no partition tree: count 1)
    const [{ leaves }] = await db.sql<{ leaves: number }>(
      `select count(*)::int as leaves from pg_partition_tree('event_outbox') where isleaf`,
    );
    expect(before).toBeGreaterThan(1_000);
    expect(after).toBeLessThan(100 * Math.max(1, leaves!));
  });

  it('stays bounded once the statistics say the lease table is empty (a VACUUM or ANALYZE under the hold)', async () => {
    holder = await holdSnapshot(db.url);
    const past = await settle(MIDDLE, 50_000);
    await insert(MIDDLE, 20);
    // what autovacuum's analyze, or the relay's VACUUM of the lease table, tells the planner during a hold: no
    // live lease. The per-fence probes must stay probes: pulled up into a semi join, the lease probe read every
    // expired entry of the expiry index (every lease deleted since the hold began), 1,460 buffers at 120,000
    const positions = at([[MIDDLE, past]], server, await dbNow());
    await db.sql('analyze event_outbox, outbox_event_leases');
    expect(await scan(positions)).toEqual([{ tenant_id: MIDDLE, has_new: true, has_due: false }]);
    await buffers(positions);
    const after = await buffers(positions);
    const [{ leaves }] = await db.sql<{ leaves: number }>(
      `select count(*)::int as leaves from pg_partition_tree('event_outbox') where isleaf`,
    );
    expect(after).toBeLessThan(100 * Math.max(1, leaves!));
  });

  it("probes a backlogged tenant from its position through the index, not the table's settled rows", async () => {
    // a tenant draining a backlog (no hold): 20,000 of its 50,000 events settled, the position at its first pending
    // one, the statistics fresh. As an EXISTS alone, the generic plan (which does not know the position) read
    // event_outbox sequentially from its start to that event: 9,303 buffers, 28 ms at every scan, which each
    // other tenant's new event waited for (the fairness bench's small tenant, p99 7-8× its idle figure)
    await insert(MIDDLE, 50_000);
    await db.sql(
      `update event_outbox set status = 'published', published_at = now()
        where id in (select id from event_outbox where tenant_id = $1 order by seq limit 20000)`,
      [MIDDLE],
    );
    await db.sql('vacuum analyze event_outbox');
    const [{ first }] = await db.sql<{ first: string }>(
      `select min(seq)::text as first from event_outbox where tenant_id = $1 and status = 'pending'`,
      [MIDDLE],
    );
    await insert(UPPER, 1);
    const positions = at(
      [
        [MIDDLE, BigInt(first!)],
        [UPPER, 0n],
      ],
      server,
      await dbNow(),
    );
    expect((await scan(positions)).map((d) => d.tenant_id)).toEqual([MIDDLE, UPPER]);
    await buffers(positions);
    const after = await buffers(positions);
    const [{ leaves }] = await db.sql<{ leaves: number }>(
      `select count(*)::int as leaves from pg_partition_tree('event_outbox') where isleaf`,
    );
    expect(after).toBeLessThan(100 * Math.max(1, leaves!));
  });
});

@Injectable()
class Seen {
  readonly ids: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'due-past-settled' })
  handle(event: OutboxEvent): void {
    this.ids.push(event.eventId);
  }
}

/**
 * The relay's own scan: a tenant whose new events came without a wake-up (written by another writer, or a wake-up
 * lost) is found by the scan from its position, and the store passes only the positions its claims would use.
 */
describe('the relay with claim positions', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  function positions(): ClaimPositions {
    return (t!.app.get(OUTBOX_STORE_PORT) as PgRelayStore)['positions'] as ClaimPositions;
  }

  async function relayUntil(seen: Seen, ids: readonly string[], what: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!ids.every((id) => seen.ids.includes(id))) {
      if (Date.now() > deadline) throw new Error(`${what}: not handled within 10 s`);
      await t!.relay.runOnce();
    }
  }

  it('finds a positioned tenant whose only new events lie past its position, without a wake-up', async () => {
    t = await buildApp({
      url: db.url,
      providers: [Seen],
      imports: [PolicySwitches.of({ claimPositions: { fullScanMs: 3_600_000, settleMs: 0 } })],
    });
    const seen = t.app.get(Seen);
    const deadline = Date.now() + 10_000;
    // relay events until the tenant has a position past the first
    while (positions().pastSettled(performance.now()).tenants.length === 0) {
      if (Date.now() > deadline) throw new Error('no position within 10 s');
      await relayUntil(seen, [await enqueueIn(t, { eventName: EVENT })], 'a warm-up event');
    }
    expect(positions().pastSettled(performance.now()).tenants).toEqual([TENANT]);
    const [row] = await db.sql<{ id: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, $2, '{}'::jsonb)
       returning id`,
      [TENANT, EVENT],
    );
    await relayUntil(seen, [row!.id], 'the event written without a wake-up');
  });
  it('looks for an idle tenant below its position once per fullScanMs, not on every scan', async () => {
    t = await buildApp({
      url: db.url,
      providers: [Seen],
      imports: [
        PolicySwitches.of({ claimPositions: { fullScanMs: 500, settleMs: 0, startScanMs: 3_600_000 } }),
      ],
    });
    const seen = t.app.get(Seen);
    const p = positions();
    const state = (): { from: bigint; netFrom: bigint } | undefined => p['tenants'].get(TENANT);
    const deadline = Date.now() + 10_000;
    // relay events until a net has moved its start off 0 and the position is past it
    while (!state() || state()!.netFrom === 0n || state()!.from <= state()!.netFrom) {
      if (Date.now() > deadline) throw new Error('no net start past 0 within 10 s');
      await relayUntil(seen, [await enqueueIn(t, { eventName: EVENT })], 'a warm-up event');
    }
    // the tenant goes idle: nothing of it is written, the relay keeps scanning for due tenants for 2 s (4 nets'
    // periods). Under a held snapshot each scan below the position walks the dead entries between (ADR 1206:
    // 657 buffers from a minute back against 77 from the position, 240k settled)
    const spy = jest.spyOn(p, 'pastSettled');
    const until = Date.now() + 2_000;
    while (Date.now() < until) await t.relay.runOnce();
    const scans = spy.mock.results.map((r) => r.value as DuePositions);
    spy.mockRestore();
    const below = scans.filter((scan) => {
      const i = scan.tenants.indexOf(TENANT);
      return i < 0 || BigInt(scan.seqs[i]!) < state()!.from;
    });
    expect(scans.length).toBeGreaterThan(8);
    expect(below.length).toBeLessThanOrEqual(5);
  });
});
