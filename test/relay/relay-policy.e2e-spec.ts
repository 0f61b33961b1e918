import { Injectable } from '@nestjs/common';
import type { Pool, PoolClient } from 'pg';
import type { EntitySubscriberInterface, QueryRunner } from 'typeorm';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OUTBOX_RELAY_POLICY, type RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches as Switches } from '../support/policy-switches';
import { relayStatement, RoundTripProbe, type ProbedStatement } from '../support/round-trip-probe';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, enqueueManyIn, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.policy.v1';

@Injectable()
class Plain {
  @OnOutboxEvent(EVENT, { consumer: 'policy-plain' })
  handle(_event: OutboxEvent): void {}
}

const ALL_OFF: Partial<RelayPolicy> = {
  lanes: 1,
  claimGrowth: null,
  leanClaim: false,
  namedStatements: false,
  unguardedClosings: false,
  optimisticBatches: false,
  wakeUpGapMs: 0,
  oneWrite: false,
  leanTransactions: false,
  pacedScans: false,
  fairShares: false,
  claimPositions: null,
  claimFloor: null,
  horizonVacuums: null,
  leaseProbesByKey: false,
};

/**
 * The relay's policy (options/relay-policy.ts): one switch per performance mechanism, made once per app from its
 * options, with the switches an app provides over it. Two apps in one process, one with every switch off, each
 * send what their own policy says.
 */
describe("the relay's policy", () => {
  let db: TestDatabase;
  let shipped: TestApp | undefined;
  let switched: TestApp | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await shipped?.close();
    await switched?.close();
    shipped = switched = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  /**
   * The second round of an app, on two events (the first round registers and warms up): its statements, round
   * trips, and the socket writes of the pool's connections meanwhile.
   */
  async function secondRound(
    t: TestApp,
  ): Promise<{ statements: ProbedStatement[]; roundTrips: number; writes: number }> {
    const pool = (t.dataSource.driver as unknown as { master: Pool }).master;
    let writes = 0;
    const counted = new WeakSet<object>();
    // every write or writev of a socket goes through its `_writeGeneric` (Node's own): counted per socket
    const onAcquire = (client: PoolClient): void => {
      const socket = (client as unknown as { connection: { stream: Record<string, unknown> } }).connection
        .stream as { _writeGeneric: (...args: unknown[]) => unknown };
      if (counted.has(socket)) return;
      counted.add(socket);
      const original = socket._writeGeneric;
      socket._writeGeneric = function (this: unknown, ...args: unknown[]) {
        writes++;
        return original.apply(this, args);
      };
    };
    pool.on('acquire', onAcquire);
    const probe = RoundTripProbe.attach(t.dataSource);
    try {
      await enqueueIn(t, { eventName: EVENT });
      expect(await t.relay.runOnce()).toMatchObject({ succeeded: 1 });
      await enqueueManyIn(t, [{ eventName: EVENT }, { eventName: EVENT }]);
      probe.take();
      writes = 0;
      expect(await t.relay.runOnce()).toMatchObject({ eventsClaimed: 2, succeeded: 2 });
      const { statements, roundTrips } = probe.take();
      return { statements, roundTrips, writes };
    } finally {
      probe.detach();
      pool.off('acquire', onAcquire);
    }
  }

  const guarded = (statements: readonly ProbedStatement[]): boolean =>
    statements.some((s) => s.text.trimStart().startsWith('do $outbox_guard$'));
  const byKeyContext = (s: ProbedStatement): boolean =>
    s.text.includes(`set_config('enable_seqscan', 'off', true)`);

  it('is made from the options, and each app in a process has its own', async () => {
    shipped = await buildApp({ url: db.url, providers: [Plain] });
    switched = await buildApp({
      url: db.url,
      providers: [Plain],
      imports: [Switches.of(ALL_OFF)],
      outbox: { relay: { concurrency: 3, maxBatchSize: 200 } },
    });
    expect(shipped.app.get(OUTBOX_RELAY_POLICY, { strict: false })).toEqual({
      lanes: 'auto',
      claimGrowth: { max: 500 },
      leanClaim: true,
      namedStatements: true,
      unguardedClosings: true,
      optimisticBatches: true,
      wakeUpGapMs: 2,
      oneWrite: true,
      leanTransactions: true,
      pacedScans: true,
      fairShares: true,
      claimPositions: { fullScanMs: 60_000, settleMs: 250, startScanMs: 600_000 },
      claimFloor: { marginMs: 600_000, refreshMs: 5_000, fullScanMs: 60_000 },
      horizonVacuums: { heldEveryMs: 60_000 },
      leaseProbesByKey: true,
    });
    expect(switched.app.get(OUTBOX_RELAY_POLICY, { strict: false })).toEqual(ALL_OFF);
  });

  it('as shipped: the lean claim, named, and a closing without the guard for handlers that write nothing', async () => {
    shipped = await buildApp({ url: db.url, providers: [Plain] });
    const { statements: sent } = await secondRound(shipped);
    const claims = sent.filter((s) => relayStatement.claim(s));
    expect(claims).toHaveLength(1);
    expect(relayStatement.fanOut(claims[0]!)).toBe(false);
    expect(relayStatement.claimNewName(claims[0]!.name)).toBe(true);
    expect(guarded(sent)).toBe(false);
    // the claim's context plans it without sequential scans: the lease probed by key (one context of the round)
    expect(sent.filter(byKeyContext)).toHaveLength(1);
  });

  it('with the switches off: the fan-out, unnamed, and the guard in every closing', async () => {
    switched = await buildApp({ url: db.url, providers: [Plain], imports: [Switches.of(ALL_OFF)] });
    const { statements: sent } = await secondRound(switched);
    const claims = sent.filter((s) => relayStatement.claim(s));
    expect(claims).toHaveLength(1);
    expect(relayStatement.fanOut(claims[0]!)).toBe(true);
    expect(sent.filter((s) => s.name !== undefined)).toEqual([]);
    expect(guarded(sent)).toBe(true);
    expect(sent.filter(byKeyContext)).toEqual([]);
  });

  it('as shipped, each round trip leaves in one socket write; with oneWrite off, each statement in one of its own', async () => {
    shipped = await buildApp({ url: db.url, providers: [Plain] });
    const one = await secondRound(shipped);
    // TypeORM's START TRANSACTION and COMMIT included: they go in the write of the claim and of the closing
    expect(one.statements.length).toBeGreaterThan(one.roundTrips);
    expect(one.writes).toBe(one.roundTrips);
    switched = await buildApp({
      url: db.url,
      providers: [Plain],
      imports: [Switches.of({ oneWrite: false })],
    });
    const each = await secondRound(switched);
    expect(each.writes).toBe(each.statements.length);
  });

  it("as shipped, the batch transaction begins and commits by the relay's statements where no subscriber listens to its start or to a commit before it happens; TypeORM's runner shows it open, and afterTransactionCommit subscribers hear its commit", async () => {
    shipped = await buildApp({ url: db.url, providers: [Plain] });
    const probe = RoundTripProbe.attach(shipped.dataSource);
    const runner = shipped.dataSource.createQueryRunner();
    const prototype = Object.getPrototypeOf(runner) as QueryRunner;
    await runner.release();
    const starts = jest.spyOn(prototype, 'startTransaction');
    const commits = jest.spyOn(prototype, 'commitTransaction');
    const heard: boolean[] = [];
    const afterCommit: EntitySubscriberInterface = {
      afterTransactionCommit: (event) => void heard.push(event.queryRunner.isTransactionActive),
    };
    shipped.dataSource.subscribers.push(afterCommit);
    /** A round on one event, with what the spies and the probe saw of it alone. */
    const round = async (): Promise<ProbedStatement[]> => {
      await enqueueIn(shipped!, { eventName: EVENT });
      starts.mockClear();
      commits.mockClear();
      heard.length = 0;
      probe.take();
      expect(await shipped!.relay.runOnce()).toMatchObject({ succeeded: 1 });
      return probe.take().statements;
    };
    try {
      await round(); // the first round registers and warms up
      const sent = await round();
      expect(starts).not.toHaveBeenCalled();
      expect(commits).not.toHaveBeenCalled();
      // as TypeORM writes them: the claim's round trip begins it (in one text with the claim's commit), the
      // closing's commits it
      expect(sent.filter((s) => s.text === 'commit; START TRANSACTION')).toHaveLength(1);
      expect(sent.filter((s) => s.text === 'COMMIT')).toHaveLength(1);
      // the batch's commit heard once, the runner then out of its transaction
      expect(heard).toEqual([false]);
      // a subscriber that hears a commit before it happens: TypeORM's own commit
      shipped.dataSource.subscribers.push({ beforeTransactionCommit: () => undefined });
      await round();
      expect(starts).not.toHaveBeenCalled();
      expect(commits).toHaveBeenCalledTimes(1);
      expect(heard).toEqual([false]);
    } finally {
      starts.mockRestore();
      commits.mockRestore();
      probe.detach();
    }
  });
});
