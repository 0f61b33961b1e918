import { Injectable } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { OnOutboxEvent } from 'nestjs-pg-outbox';
import {
  fanOutPendingEvents,
  heartbeatConsumers,
  mayVacuumLeases,
  leaseVacuumHorizon,
  BATCH_MARKER,
  recordOutcomes,
  outboxNames,
} from '../../libs/outbox/src/store/sql';
import { LeaseVacuum } from '../../libs/outbox/src/maintenance/lease-vacuum';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { waitFor } from '../support/wait-for';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { deliveredPair } from '../support/pair-outcomes';
import { truncateTables } from '../support/outbox-fixture';

/** The outbox's names in the default schema, which these statements run against. */
const NAMES = outboxNames();

const TENANT = '5ac0a1c4-0000-4000-8000-000000000001';
const EVENT = 'test.vacuum.v1';
const EVENTS = 4000;

@Injectable()
class Counter {
  count = 0;

  @OnOutboxEvent(EVENT, { consumer: 'vacuum-counter' })
  handle(): void {
    this.count++;
  }
}

/**
 * Every in-process batch inserts a lease row per event in `outbox_event_leases` and deletes it with the
 * outcome. Without VACUUM, new rows go to new pages and the dead ones stay in theirs (every claim reads them):
 * the relay vacuums the table itself every `relay.vacuumLeasesEvery` released leases, when its role may.
 */
describe('vacuuming the lease table', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    // Only the relay's own vacuum may shrink the table here: an autovacuum run in the middle of the drain without
    // it (likelier the slower the machine) would make the "grown" figure depend on the load.
    await db.sql(`alter table public.outbox_event_leases set (autovacuum_enabled = false)`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  /**
   * The lease table's size in pages, how many times it was vacuumed by hand (autovacuum not counted), and its dead
   * rows as the statistics count them (each backend reports its deletions within a second or so, or as it ends).
   */
  async function leaseTable(): Promise<{ pages: number; vacuums: number; dead: number }> {
    const [row] = await db.sql<{ pages: number; vacuums: number; dead: number }>(
      `select (pg_relation_size(relid) / current_setting('block_size')::int)::int as pages,
              vacuum_count::int as vacuums, n_dead_tup::int as dead
         from pg_stat_user_tables where relid = 'public.outbox_event_leases'::regclass`,
    );
    return row!;
  }

  /** Replaces the outbox's events with `count` fresh ones. */
  async function freshEvents(count: number): Promise<void> {
    await truncateTables(db, 'public.event_outbox, public.outbox_deliveries, public.consumer_inbox');
    await db.sql(
      `insert into public.event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, $2, jsonb_build_object('n', n) from generate_series(1, $3) n`,
      [TENANT, EVENT, count],
    );
  }

  /** Drains `EVENTS` fresh events with the given setting; says how the lease table grew and was vacuumed. */
  async function drainWith(vacuumLeasesEvery: number): Promise<{ pages: number; vacuums: number }> {
    await freshEvents(EVENTS);
    const before = await leaseTable();
    const t = await buildApp({
      url: db.url,
      providers: [Counter],
      // claims of 100 throughout (not growing to relay.maxBatchSize's 500): a vacuum is due every two batches, so
      // some finish while the drain still inserts leases, however late a loaded machine runs them
      outbox: { relay: { batchSize: 100, maxBatchSize: 100, vacuumLeasesEvery } },
    });
    try {
      expect((await t.relay.drain()).succeeded).toBe(EVENTS);
      expect(t.app.get(Counter).count).toBe(EVENTS);
    } finally {
      await t.close(); // waits for a vacuum still running
    }
    const after = await leaseTable();
    return { pages: after.pages, vacuums: after.vacuums - before.vacuums };
  }

  it('vacuums the table every so many released leases through a long drain, where it would grow by a page per batch', async () => {
    // first, so the table starts empty: each vacuum leaves its pages free for the next leases
    const vacuumed = await drainWith(200);
    const grown = await drainWith(0);
    // one vacuum per 200 leases at most (one runs at a time: under load, fewer), none when turned off
    expect(vacuumed.vacuums).toBeGreaterThanOrEqual(1);
    expect(vacuumed.vacuums).toBeLessThanOrEqual(EVENTS / 200);
    expect(grown.vacuums).toBe(0);
    // about a page per hundred leases without vacuum; with it, fewer: how many depends on when each background
    // vacuum of the relay's ran
    expect(grown.pages).toBeGreaterThanOrEqual(30);
    expect(vacuumed.pages).toBeLessThan(grown.pages);
  });

  it('skips its vacuums while a held snapshot keeps them from removing anything, and vacuums again once it ends', async () => {
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    let t: TestApp | undefined;
    try {
      // a snapshot only, no transaction id: what a pg_dump or a report holds
      await holder.query('begin isolation level repeatable read');
      await holder.query('select 1');
      await freshEvents(EVENTS);
      t = await buildApp({
        url: db.url,
        providers: [Counter],
        // the vacuum that runs every heldEveryMs while held would not come within the test, however slow
        imports: [PolicySwitches.of({ horizonVacuums: { heldEveryMs: 3_600_000 } })],
        outbox: { relay: { batchSize: 100, maxBatchSize: 100, vacuumLeasesEvery: 200 } },
      });
      // every vacuum (or skip) the relay starts, to wait for them before counting
      const vacuum = t.app.get(LeaseVacuum, { strict: false });
      const started: Promise<void>[] = [];
      const note = vacuum.noteReleased.bind(vacuum);
      jest.spyOn(vacuum, 'noteReleased').mockImplementation((leases) => {
        const run = note(leases);
        if (run) started.push(run);
        return run;
      });
      const drained = async (): Promise<number> => {
        const before = (await leaseTable()).vacuums;
        expect((await t!.relay.drain()).succeeded).toBeGreaterThan(0);
        await Promise.all(started);
        return (await leaseTable()).vacuums - before;
      };

      // 20 vacuums due (20 ran before the horizon was read): the first reads the horizon where the holder keeps it,
      // and none after it may remove a row; one more if a transaction older than the holder's snapshot, elsewhere
      // on the server, ends during the drain (the horizon then moves up to the holder's)
      const held = await drained();
      expect(started.length).toBeGreaterThanOrEqual(2);
      expect(held).toBeGreaterThanOrEqual(1);
      expect(held).toBeLessThanOrEqual(3);
      await waitFor(async () => (await leaseTable()).dead >= EVENTS, {
        message: 'the dead leases the hold keeps to be counted',
      });

      await holder.query('commit');
      // Every snapshot's xmin is the oldest transaction running on the whole server: on a shared one, another
      // database's long transaction holds this one's horizon too (through the snapshots of its sessions) and
      // the relay rightly keeps skipping. Wait until none older than the drain's deletions runs.
      const [{ next }] = await db.sql<{ next: string }>(
        `select pg_snapshot_xmax(pg_current_snapshot())::text as next`,
      );
      await waitFor(
        async () =>
          (
            await db.sql<{ passed: boolean }>(
              `select pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8 as passed`,
              [next],
            )
          )[0]!.passed,
        {
          timeoutMs: 40_000,
          message: 'the transactions running elsewhere on the server since the hold to end',
        },
      );
      await freshEvents(EVENTS / 4);
      started.length = 0;
      expect(await drained()).toBeGreaterThanOrEqual(1);
      // a vacuum after the hold removed the dead leases; only those released after the last vacuum are left
      await waitFor(async () => (await leaseTable()).dead < EVENTS / 2, {
        message: 'the dead leases to be vacuumed',
      });
    } finally {
      await holder.end();
      await t?.close();
    }
  });

  it('reads the vacuum horizon of a snapshot held by another session, as a role without privileges', async () => {
    const role = `outbox_horizon_probe_${randomBytes(4).toString('hex')}`;
    const holder = new Client({ connectionString: db.url });
    const client = new Client({ connectionString: db.url });
    await holder.connect();
    await client.connect();
    try {
      await client.query(`create role ${role} nologin`);
      await client.query(`set role ${role}`);
      const read = leaseVacuumHorizon();
      const horizon = async (): Promise<string | null> =>
        ((await client.query(read.text, read.values)).rows[0] as { horizon: string } | undefined)?.horizon ??
        null;
      const free = await horizon();
      await holder.query('begin isolation level repeatable read');
      const [{ xmin }] = // the snapshot's xmin as a 32-bit id (xid8 counts the epoch too)
        (
          await holder.query(
            `select (pg_snapshot_xmin(pg_current_snapshot())::text::bigint & 4294967295)::text as xmin`,
          )
        ).rows as { xmin: string }[];
      expect(await horizon()).toBe(xmin);
      await holder.query('commit');
      expect(await horizon()).toBe(free);
    } finally {
      await holder.end();
      await client.query('reset role').catch(() => undefined);
      await client.query(`drop role if exists ${role}`).catch(() => undefined);
      await client.end();
    }
  });

  it('vacuums only where the role may: the owner may, a role with DML grants alone may not, outbox_relay from PostgreSQL 17', async () => {
    const role = `outbox_vacuum_probe_${randomBytes(4).toString('hex')}`;
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      const check = mayVacuumLeases(NAMES);
      expect((await client.query(check.text, check.values)).rows).toEqual([{ allowed: true }]);
      await client.query(`create role ${role} nologin`);
      await client.query(`grant select, insert, update, delete on public.outbox_event_leases to ${role}`);
      await client.query(`set role ${role}`);
      expect((await client.query(check.text, check.values)).rows).toEqual([{ allowed: false }]);
      // the relay's role may from PostgreSQL 17 on (the migrations grant it MAINTAIN there), not before
      await client.query('reset role');
      await client.query(`grant outbox_relay to ${role}`);
      await client.query(`set role ${role}`);
      const [{ version }] = (
        await client.query(`select current_setting('server_version_num')::int as version`)
      ).rows as { version: number }[];
      expect((await client.query(check.text, check.values)).rows).toEqual([{ allowed: version >= 170000 }]);
    } finally {
      await client.query('reset role').catch(() => undefined);
      await client.query(`drop owned by ${role}`).catch(() => undefined);
      await client.query(`drop role if exists ${role}`).catch(() => undefined);
      await client.end();
    }
  });

  it("counts what it releases from the outcome statement's own count of deleted leases", async () => {
    await truncateTables(db, 'public.event_outbox, public.outbox_deliveries, public.consumer_inbox');
    await db.sql(`delete from public.outbox_event_leases`);
    // an event name of its own: the drains above registered a consumer of EVENT
    const event = 'test.vacuum-count.v1';
    const consumers = ['count-a', 'count-b'];
    const registered = heartbeatConsumers(
      NAMES,
      randomUUID(),
      consumers.map((name) => ({ name, eventNames: [event], kind: 'in_process' })),
    );
    await db.sql(registered.text, registered.values);
    await db.sql(
      `insert into public.event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, $2, '{}' from generate_series(1, 3)`,
      [TENANT, event],
    );
    const leaseToken = randomUUID();
    const claim = fanOutPendingEvents(NAMES, {
      tenantId: TENANT,
      hosted: consumers,
      inProcess: consumers,
      tenantConsumers: [],
      liveWithinMs: 60_000,
      limit: 10,
      leaseToken,
      leaseMs: 60_000,
    });
    const [claimed] = await db.sql<{ leases: { event_id: string; event_seq: string; pairs: string }[] }>(
      claim.text,
      claim.values,
    );
    const outcomes = claimed!.leases.flatMap((row) =>
      row.pairs.split(' ').map((consumer) => deliveredPair(row.event_id, row.event_seq, consumer)),
    );
    expect(outcomes).toHaveLength(6);
    // a fenced outcome is written only in its batch's transaction, marked with the lease token
    const outcome = recordOutcomes(NAMES, outcomes, leaseToken, { fenced: true });
    await db.sql('begin');
    await db.sql(`select set_config('${BATCH_MARKER}', $1, true)`, [leaseToken]);
    const [recorded] = await db.sql(outcome.text, outcome.values);
    await db.sql('commit');
    expect(recorded).toEqual({ recorded: 6, events: 3, released: 3 });
  });

  it('rejects a negative or fractional setting at boot', async () => {
    await expect(buildApp({ url: db.url, outbox: { relay: { vacuumLeasesEvery: -1 } } })).rejects.toThrow(
      /relay\.vacuumLeasesEvery/,
    );
  });
});
