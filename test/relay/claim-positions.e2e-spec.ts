import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OUTBOX_STORE_PORT } from '../../libs/outbox/src/store/outbox-store.port';
import type { PgRelayStore } from '../../libs/outbox/src/store/pg-relay-store';
import { ClaimPositions, type PositionReading } from '../../libs/outbox/src/store/claim-positions';
import { positionReading } from '../../libs/outbox/src/store/sql/fan-out';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, TENANT, truncateOutbox } from '../support/outbox-fixture';
import { PolicySwitches } from '../support/policy-switches';

const EVENT = 'test.positions.v1';

@Injectable()
class Seen {
  readonly ids: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'positions-local' })
  handle(event: OutboxEvent): void {
    this.ids.push(event.eventId);
  }
}

/**
 * Claim positions (docs/adr/1206-claims-that-start-past-the-settled.md): a claim of new events scans from its
 * tenant's position, past settled events. `seq` is given at insert and transactions commit in any order: an
 * event with a lower `seq` may commit after a later one was claimed and settled. The position must not pass it.
 * No full scan comes to the rescue here (one an hour) and a reading is safe at once (`settleMs` 0), so only the
 * position's own rule keeps the event in reach.
 */
describe('claim positions', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  let other: Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await other?.end();
    other = undefined;
    await t?.close();
    t = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function start(fullScanMs = 3_600_000, startScanMs?: number): Promise<Seen> {
    t = await buildApp({
      url: db.url,
      providers: [Seen],
      imports: [PolicySwitches.of({ claimPositions: { fullScanMs, settleMs: 0, startScanMs } })],
    });
    return t.app.get(Seen);
  }

  function position(): bigint {
    const positions = (t!.app.get(OUTBOX_STORE_PORT) as PgRelayStore)['positions'] as ClaimPositions;
    return BigInt(positions.from(TENANT, performance.now()));
  }

  async function seqOf(id: string): Promise<bigint> {
    const [row] = await db.sql<{ seq: string }>(`select seq::text from event_outbox where id = $1`, [id]);
    return BigInt(row!.seq);
  }

  /** Runs the relay until `ids` were all handled, or fails after 10 s. */
  async function relayUntil(seen: Seen, ids: readonly string[]): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!ids.every((id) => seen.ids.includes(id))) {
      if (Date.now() > deadline)
        throw new Error(`not handled within 10 s: ${ids.filter((id) => !seen.ids.includes(id)).join(', ')}`);
      await t!.relay.runOnce();
    }
  }

  /**
   * Enqueues and relays an event at a time until the position passes `seq`, or fails after 10 s. Transactions of
   * the whole server count (another database's open transaction holds the position back too): it may take more
   * than one claim.
   */
  async function relayUntilPast(seen: Seen, seq: bigint): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (position() <= seq) {
      if (Date.now() > deadline) throw new Error(`the position stayed at ${position()}, not past ${seq}`);
      await relayUntil(seen, [await enqueueIn(t!, { eventName: EVENT, payload: {} })]);
    }
  }

  it('moves past settled events once no open transaction can commit below them', async () => {
    const seen = await start();
    const first = await enqueueIn(t!, { eventName: EVENT, payload: {} });
    await relayUntil(seen, [first]);
    await relayUntilPast(seen, await seqOf(first));
  });

  it('delivers an event whose transaction commits after a later event was claimed and settled', async () => {
    const seen = await start();
    const warm = await enqueueIn(t!, { eventName: EVENT, payload: {} });
    await relayUntil(seen, [warm]);
    // a producer's transaction takes its seq now and commits last
    other = new Client({ connectionString: db.url });
    await other.connect();
    const late = randomUUID();
    await other.query('begin');
    const inserted = await other.query<{ seq: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload) values ($1, $2, $3, '{}'::jsonb) returning seq::text`,
      [late, TENANT, EVENT],
    );
    const lateSeq = BigInt(inserted.rows[0]!.seq);
    const later: string[] = [];
    for (let i = 0; i < 3; i++) {
      later.push(await enqueueIn(t!, { eventName: EVENT, payload: { i } }));
      await relayUntil(seen, later);
    }
    await t!.relay.runOnce();
    // the position waits below the open transaction's event
    expect(position()).toBeLessThanOrEqual(lateSeq);
    await other.query('commit');
    expect(lateSeq).toBeLessThan(await seqOf(later[0]!));
    await relayUntil(seen, [late]);
    expect(await db.sql(`select status from event_outbox where id = $1`, [late])).toEqual([
      { status: 'published' },
    ]);
    // and the position moves on past them all once it is settled
    await relayUntilPast(seen, await seqOf(later[2]!));
  });

  it('finds an event below the position in the full scan that comes every fullScanMs', async () => {
    const seen = await start(1000);
    const first = await enqueueIn(t!, { eventName: EVENT, payload: {} });
    await relayUntil(seen, [first]);
    await relayUntilPast(seen, await seqOf(first));
    // what no rule of the position foresees (an insert that waited, without a transaction id, longer than
    // settleMs): a pending event below it, written here with a seq of its own
    const below = randomUUID();
    await db.sql(
      `insert into event_outbox (id, seq, tenant_id, event_name, payload) overriding system value
       values ($1, $2, $3, $4, '{}'::jsonb)`,
      [below, String(await seqOf(first)), TENANT, EVENT],
    );
    expect(position()).toBeGreaterThan(await seqOf(below));
    const since = Date.now();
    await relayUntil(seen, [below]);
    expect(Date.now() - since).toBeLessThan(5_000);
    expect(position()).toBe(await seqOf(below));
  });
  it('finds an event between the net start and the position at the next net, scans from 0 an hour apart', async () => {
    const seen = await start(1000, 3_600_000);
    const positions = (t!.app.get(OUTBOX_STORE_PORT) as PgRelayStore)['positions'] as ClaimPositions;
    const netFrom = (): bigint =>
      (positions['tenants'].get(TENANT) as { netFrom: bigint } | undefined)?.netFrom ?? 0n;
    const first = await enqueueIn(t!, { eventName: EVENT, payload: {} });
    await relayUntil(seen, [first]);
    // until a net from 0 has run and its start moved up to where the position stood
    const deadline = Date.now() + 10_000;
    while (netFrom() === 0n) {
      if (Date.now() > deadline) throw new Error('no net moved its start within 10 s');
      await relayUntil(seen, [await enqueueIn(t!, { eventName: EVENT, payload: {} })]);
    }
    const net = netFrom();
    await relayUntilPast(seen, net);
    // what no rule of the position foresees, at the net's start: found by the next net (a second), not the scan
    // from 0 an hour away
    const below = randomUUID();
    await db.sql(
      `insert into event_outbox (id, seq, tenant_id, event_name, payload) overriding system value
       values ($1, $2, $3, $4, '{}'::jsonb)`,
      [below, String(net), TENANT, EVENT],
    );
    expect(position()).toBeGreaterThan(net);
    const since = Date.now();
    await relayUntil(seen, [below]);
    expect(Date.now() - since).toBeLessThan(5_000);
  });
});

/**
 * The position's rule read against real snapshots, the claims' answers taken in by `ClaimPositions` in an order
 * of their own: a relay's claims of one tenant may be answered in another order than sent (two lanes on a
 * tenant, a claim whose lease insert waits for another's), so a reading can come from a snapshot older than the
 * one that proved the position. Such a reading must not move the position past what it could not see.
 */
describe('claim positions, readings answered out of order', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  interface Taken {
    from: string;
    reading: PositionReading;
    sentAt: number;
  }

  /** A claim's reading from where `positions` stands (the statement's snapshot, as the claims read it). */
  async function take(positions: ClaimPositions): Promise<Taken> {
    const sentAt = performance.now();
    const from = positions.from(TENANT, sentAt);
    const [row] = await db.sql<{ position: PositionReading }>(
      `select ${positionReading(outboxNames(), '$2')} as position`,
      [TENANT, from],
    );
    return { from, reading: row!.position, sentAt };
  }

  function record(positions: ClaimPositions, t: Taken): void {
    positions.record(TENANT, t.from, t.reading, t.sentAt, performance.now());
  }

  function proven(positions: ClaimPositions): bigint | null {
    const tenants = positions['tenants'] as Map<string, { proven: bigint | null }>;
    return tenants.get(TENANT)?.proven ?? null;
  }

  /** The position kept (not `from`'s answer, which is 0 when a full scan is due). */
  function kept(positions: ClaimPositions): bigint | null {
    const tenants = positions['tenants'] as Map<string, { from: bigint }>;
    return tenants.get(TENANT)?.from ?? null;
  }

  async function insert(): Promise<bigint> {
    const [row] = await db.sql<{ seq: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload) values ($1, $2, $3, '{}'::jsonb) returning seq::text`,
      [randomUUID(), TENANT, EVENT],
    );
    return BigInt(row!.seq);
  }

  /**
   * Claims (readings taken in at once) until `done`, or fails after 20 s: a proof needs a claim whose snapshot no
   * transaction of the server had an id in, which a busy shared server may hold off a while.
   */
  async function claimUntil(positions: ClaimPositions, done: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`not within 20 s: ${what}`);
      record(positions, await take(positions));
    }
  }

  /** An event claimed, then settled, and claims until the position is past it: its seq. */
  async function pastSettled(positions: ClaimPositions): Promise<bigint> {
    const settled = await insert();
    record(positions, await take(positions));
    await db.sql(`update event_outbox set status = 'published' where seq = $1`, [String(settled)]);
    await claimUntil(positions, () => (kept(positions) ?? 0n) > settled, 'past settled');
    return settled;
  }

  it('a reading older than the proof does not move the position past an event it could not see', async () => {
    const positions = new ClaimPositions(3_600_000, 0);
    await pastSettled(positions);
    // a claim whose snapshot sees no pending event, answered late
    const slow = await take(positions);
    expect(slow.reading.first).toBeNull();
    // an event committed after that snapshot, seen (not claimed: say the claim fell back to the fan-out) and
    // proven by the claims answered meanwhile
    const fresh = await insert();
    await claimUntil(positions, () => (proven(positions) ?? -1n) >= fresh, `${fresh} proven`);
    expect(BigInt(positions.from(TENANT, performance.now()))).toBeLessThanOrEqual(fresh);
    record(positions, slow);
    // the event is still pending: the position must stay at or below it
    expect(BigInt(positions.from(TENANT, performance.now()))).toBeLessThanOrEqual(fresh);
  });

  it('a reading from above where a full scan took the position back since does not move it up again', async () => {
    const positions = new ClaimPositions(300, 0);
    const settled = await pastSettled(positions);
    // a pending event below the position (what only the full scan finds: an insert that waited without an id)
    await db.sql(
      `insert into event_outbox (id, seq, tenant_id, event_name, payload) overriding system value
       values ($1, $2, $3, $4, '{}'::jsonb)`,
      [randomUUID(), String(settled), TENANT, EVENT],
    );
    // a claim from the position, answered late
    let slow = await take(positions);
    while (slow.from === '0') {
      record(positions, slow);
      slow = await take(positions);
    }
    // the full scan finds the event and takes the position back to it
    await claimUntil(positions, () => kept(positions)! <= settled, 'back');
    record(positions, slow);
    expect(kept(positions)).toBeLessThanOrEqual(settled);
  });
});
