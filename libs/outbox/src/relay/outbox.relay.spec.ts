import type { ModuleRef } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import type { ExternalDispatcher } from '../batch/external.dispatcher';
import { InProcessDispatcher } from '../batch/in-process.dispatcher';
import type { OutboxWakeup } from '../enqueue/outbox-wakeup';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import type { LeaseVacuum } from '../maintenance/lease-vacuum';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxModuleOptions } from '../options/outbox-module-options.interface';
import { relayPolicy } from '../options/relay-policy';
import type { ClaimAnswer } from '../store/outbox-store.port';
import { claimAnswer, FakeClock, FakeStore, fakeConsumer, fakeDelivery } from '../store/outbox-store.fake';
import { OutboxRelay } from './outbox.relay';
import { SHARED_FOR_MS } from './tenant-shares';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';

/** A relay on a fake store and clock: no database, no poll (its interval is an hour). */
function relayOn(
  consumers: OutboxConsumer[],
  options: OutboxModuleOptions = {},
): { relay: OutboxRelay; store: FakeStore; clock: FakeClock; tick: () => Promise<void> } {
  const { options: resolved } = resolveOutboxOptions({
    ...options,
    relay: { concurrency: 1, batchSize: 2, pollIntervalMs: 3_600_000, ...options.relay },
  });
  const store = new FakeStore();
  const clock = new FakeClock();
  const registry = new OutboxConsumerRegistry();
  registry.load(consumers);
  const instrumentation = new OutboxInstrumentation();
  const scheduler = new SchedulerRegistry();
  const relay = new OutboxRelay(
    resolved,
    registry,
    store,
    new InProcessDispatcher(instrumentation),
    { dispatch: () => Promise.resolve([]) } as unknown as ExternalDispatcher,
    { noteReleased: () => null } as unknown as LeaseVacuum,
    { get: () => scheduler } as unknown as ModuleRef,
    instrumentation,
    { subscribe: () => undefined } as unknown as OutboxWakeup,
    relayPolicy(resolved),
    clock,
  );
  // the scheduled tick, awaited (the interval and wake-ups start it without waiting)
  const tick = (): Promise<void> => (relay as unknown as { tick(): Promise<void> }).tick();
  return { relay, store, clock, tick };
}

/** A claim of `n` new events of tenant `tenantId` for consumer `a`. */
const events = (n: number, tenantId = A): ClaimAnswer =>
  claimAnswer(Array.from({ length: n }, (_, i) => fakeDelivery(tenantId, 'a', `${tenantId}-e${i}`)));

/** A claim of `n` new events of tenant `tenantId` for consumer `a`, their ids `<tenant>-<tag>-<i>`. */
const batchOf = (tenantId: string, tag: string, n: number): ClaimAnswer =>
  claimAnswer(Array.from({ length: n }, (_, i) => fakeDelivery(tenantId, 'a', `${tenantId}-${tag}-${i}`)));

/**
 * Three rounds of A's backlog: alone (found by the scan), beside B (held to its share, 2), alone on one lane;
 * then B's two late visits.
 */
function backlogBesideWokenB(store: FakeStore): void {
  store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
  store.claims.push(
    batchOf(A, 'r1', 2),
    batchOf(B, 'r2', 1),
    batchOf(A, 'r2', 2),
    batchOf(A, 'r3', 2),
    batchOf(B, 'w1', 1),
    batchOf(B, 'w2', 1),
  );
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

/** Lets the relay's promises run (no timer: a fixed number of event-loop turns at most) until `done`. */
async function flushUntil(done: () => boolean): Promise<void> {
  for (let turn = 0; turn < 50 && !done(); turn++) await new Promise((resolve) => setImmediate(resolve));
}

/** The tenants claimed for and the scans, in order: what the rounds did. */
const trace = (store: FakeStore): string[] =>
  store.log
    .filter((e) => e.op === 'claim' || e.op === 'dueTenants' || e.op === 'heartbeat')
    .map((e) => (e.op === 'claim' ? `claim ${e.tenantId === A ? 'A' : 'B'}` : e.op));

describe('OutboxRelay', () => {
  describe('runOnce and drain', () => {
    it('beats the registry, scans, claims, runs the handlers and commits their outcomes, in one round', async () => {
      const { relay, store } = relayOn([fakeConsumer('a')]);
      store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
      store.claims.push(events(1));
      const result = await relay.runOnce();
      expect(trace(store)).toEqual(['heartbeat', 'dueTenants', 'claim A']);
      expect(store.committed.map((o) => o.status)).toEqual(['delivered']);
      expect(result).toMatchObject({ tenants: 1, eventsClaimed: 1, deliveriesClaimed: 1, succeeded: 1 });
    });

    it("beats the registry again only once registry.heartbeatMs passed on the relay's clock", async () => {
      const { relay, store, clock } = relayOn([fakeConsumer('a')], { registry: { heartbeatMs: 1_000 } });
      await relay.runOnce();
      clock.advance(999);
      await relay.runOnce();
      expect(store.ops('heartbeat')).toHaveLength(1);
      clock.advance(1);
      await relay.runOnce();
      expect(store.ops('heartbeat')).toHaveLength(2);
    });

    it('leaves the registry at shutdown only when it joined it', async () => {
      const joined = relayOn([fakeConsumer('a')]);
      await joined.relay.runOnce();
      await joined.relay.stop();
      expect(joined.store.ops('leaveRegistry')).toHaveLength(1);
      const never = relayOn([fakeConsumer('a')]);
      await never.relay.stop();
      expect(never.store.ops('leaveRegistry')).toHaveLength(0);
    });

    it('drains: rounds go on while they claim something, and stop at the first that claims nothing', async () => {
      const { relay, store } = relayOn([fakeConsumer('a')]);
      store.scans.push(
        [{ tenantId: A, hasNew: true, hasDue: false }],
        [{ tenantId: A, hasNew: true, hasDue: false }],
      );
      store.claims.push(events(1), events(1));
      const result = await relay.drain();
      expect(trace(store)).toEqual([
        'heartbeat',
        'dueTenants',
        'claim A',
        'dueTenants',
        'claim A',
        'dueTenants',
      ]);
      expect(result).toMatchObject({ tenants: 2, succeeded: 2 });
    });

    it('brings a tenant whose batch came back full first in the next round without scanning again, leaving a lane to the others a while', async () => {
      const { relay, store } = relayOn([fakeConsumer('a')], { relay: { concurrency: 2 } });
      store.scans.push([
        { tenantId: A, hasNew: true, hasDue: false },
        { tenantId: B, hasNew: true, hasDue: false },
      ]);
      store.claims.push(events(2, A), events(1, B));
      const result = await relay.drain();
      // the scan was complete a moment ago on the relay's clock: the second round visits A alone, on one lane
      // (B was due a moment ago: the other lane stays free for it, ADR 1106)
      expect(trace(store)).toEqual(['heartbeat', 'dueTenants', 'claim A', 'claim B', 'claim A']);
      expect(result).toMatchObject({ tenants: 3, eventsClaimed: 3, succeeded: 3 });
    });

    it('visits a tenant with a backlog alone on every lane, counted once', async () => {
      const { relay, store, clock } = relayOn([fakeConsumer('a')], { relay: { concurrency: 2 } });
      store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
      store.claims.push(events(2, A), events(2, A), events(1, A));
      await relay.runOnce();
      clock.advance(SHARED_FOR_MS);
      const result = await relay.runOnce();
      // (the scan is stale by then: the round scans again, beside its visits)
      expect(trace(store)).toEqual([
        'heartbeat',
        'dueTenants',
        'claim A',
        'dueTenants',
        'claim A',
        'claim A',
      ]);
      // a tenant visited on several lanes counts once in a round
      expect(result).toMatchObject({ tenants: 1, eventsClaimed: 3, succeeded: 3 });
    });

    it('claims a whole batch for a lone busy tenant of a fixed list (relay.tenants), whatever the weights', async () => {
      // every listed tenant counts as due each round: weighted shares would hold B to 1 of 100 while A is idle
      const { relay, store } = relayOn([fakeConsumer('a')], {
        relay: { concurrency: 2, batchSize: 100, tenants: () => [A, B], tenantWeights: { [A]: 100, [B]: 1 } },
      });
      store.claims.push(claimAnswer([]), events(100, B));
      await relay.runOnce();
      const limits = store.log
        .filter((e) => e.op === 'claim')
        .map((e) => [e.tenantId === A ? 'A' : 'B', (e.request as { limit: number }).limit]);
      expect(limits).toContainEqual(['B', 100]);
    });

    it('asks the pool for its size only for relay.concurrency auto: two lanes from a pool of 8', async () => {
      const { relay, store } = relayOn([fakeConsumer('a')], { relay: { concurrency: 'auto' } });
      store.pool = 8;
      store.scans.push([{ tenantId: A, hasNew: true, hasDue: false, backlog: false }]);
      store.claims.push(events(2, A));
      await relay.drain();
      expect(trace(store)).toEqual(['heartbeat', 'dueTenants', 'claim A', 'claim A', 'claim A']);
    });
  });

  describe('the tick', () => {
    it('goes on while its rounds come back full, and ends at the first that comes back short', async () => {
      // claims that do not grow: a full batch is one of relay.batchSize
      const { store, tick } = relayOn([fakeConsumer('a')], { relay: { maxBatchSize: 2 } });
      store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
      store.claims.push(events(2), events(2), events(1));
      await tick();
      expect(trace(store)).toEqual(['heartbeat', 'dueTenants', 'claim A', 'claim A', 'claim A']);
    });

    it('ends after a short round that claimed something, unless a consumer is ordered: then it looks once more', async () => {
      const plain = relayOn([fakeConsumer('a')]);
      plain.store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
      plain.store.claims.push(events(1));
      await plain.tick();
      expect(trace(plain.store)).toEqual(['heartbeat', 'dueTenants', 'claim A']);

      const ordered = relayOn([fakeConsumer('a', { ordered: true })]);
      ordered.store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
      ordered.store.claims.push(events(1));
      await ordered.tick();
      expect(trace(ordered.store)).toEqual(['heartbeat', 'dueTenants', 'claim A', 'dueTenants']);
    });

    it('runs one more round, to the tenant named, for a wake-up that came during a round', async () => {
      const made: OutboxRelay[] = [];
      const waking = fakeConsumer('a', {
        handle: (event) => void (event.tenantId === A && made[0]!.wake([B])),
      });
      const { relay, store, tick } = relayOn([waking]);
      made.push(relay);
      relay.start();
      try {
        store.scans.push([{ tenantId: A, hasNew: true, hasDue: false }]);
        store.claims.push(events(1, A), events(1, B));
        await tick();
        // the scan of the first round is fresh and complete: the second goes to B alone
        expect(trace(store)).toEqual(['heartbeat', 'dueTenants', 'claim A', 'claim B']);
      } finally {
        await relay.stop();
      }
    });

    it('visits a backlogged tenant on the lane still committing its batch: a tenant woken meanwhile is not held behind that commit', async () => {
      // A's batches: the first round alone (it wakes B), the second beside B (its commit held from then on), the
      // third alone with its handler held, so that the round stays open while B is woken twice (ADR 1106)
      const hold = { commits: false, handler: deferred() };
      const made: OutboxRelay[] = [];
      const consumer = fakeConsumer('a', {
        handle: (event) => {
          if (event.eventId === `${A}-r1-0`) made[0]!.wake([B]);
          if (event.eventId === `${A}-r2-0`) hold.commits = true;
          return event.eventId === `${A}-r3-0` ? hold.handler.promise : undefined;
        },
      });
      const { relay, store, tick } = relayOn([consumer], { relay: { concurrency: 2 } });
      made.push(relay);
      const commit = deferred();
      store.commitHeld = (tenantId) => (hold.commits && tenantId === A ? commit.promise : null);
      relay.start();
      try {
        backlogBesideWokenB(store);
        const ticking = tick();
        await flushUntil(() => store.claims.length === 2);
        expect(trace(store).filter((t) => t === 'claim B')).toHaveLength(1);
        relay.wake([B]);
        await flushUntil(() => store.claims.length === 1);
        relay.wake([B]);
        await flushUntil(() => store.claims.length === 0);
        // both of B's wake-ups claimed at once on the free lane, while A's second batch still commits (on the lane
        // that had A's claim before, not that one: B's first late visit would wait for that commit, and the second
        // for the round's end)
        expect(trace(store).filter((t) => t === 'claim B')).toHaveLength(3);
        hold.handler.resolve();
        commit.resolve();
        await ticking;
      } finally {
        hold.handler.resolve();
        commit.resolve();
        await relay.stop();
      }
    });

    it("visits a tenant woken while both lanes work on the lane that frees up first, not at the round's end", async () => {
      // A's batches: the first round alone (it wakes B), the second beside B, the third alone on one lane with its
      // handler held; B woken on the other lane, its handler held, and woken again while both lanes work (ADR 1106)
      const hold = { a: deferred(), b: deferred() };
      const made: OutboxRelay[] = [];
      const consumer = fakeConsumer('a', {
        handle: (event) => {
          if (event.eventId === `${A}-r1-0`) made[0]!.wake([B]);
          if (event.eventId === `${A}-r3-0`) return hold.a.promise;
          return event.eventId === `${B}-w1-0` ? hold.b.promise : undefined;
        },
      });
      const { relay, store, tick } = relayOn([consumer], { relay: { concurrency: 2 } });
      made.push(relay);
      relay.start();
      try {
        backlogBesideWokenB(store);
        const ticking = tick();
        await flushUntil(() => store.claims.length === 2);
        relay.wake([B]);
        await flushUntil(() => store.claims.length === 1);
        relay.wake([B]);
        await flushUntil(() => false);
        // both lanes work (A's batch, B's first): B's second wake-up waits for a lane
        expect(trace(store).filter((t) => t === 'claim B')).toHaveLength(2);
        hold.a.resolve();
        await flushUntil(() => store.claims.length === 0);
        // A's visit done, its lane takes B at once, while B's first visit still runs: the round's own work is done,
        // yet the lane is free (before, B waited for the round's end, here for B's first visit)
        expect(trace(store).filter((t) => t === 'claim B')).toHaveLength(3);
        hold.b.resolve();
        await ticking;
      } finally {
        hold.a.resolve();
        hold.b.resolve();
        await relay.stop();
      }
    });

    it('never rejects: a round that failed is logged, and the next tick starts afresh', async () => {
      const { relay, store, tick } = relayOn([fakeConsumer('a')]);
      store.scans.push(
        [{ tenantId: A, hasNew: true, hasDue: false }],
        [{ tenantId: A, hasNew: true, hasDue: false }],
      );
      store.claims.push(new Error('connection lost'), events(1));
      await expect(tick()).resolves.toBeUndefined();
      expect(relay.lastRoundAt).not.toBeNull();
      await tick();
      expect(trace(store)).toEqual(['heartbeat', 'dueTenants', 'claim A', 'dueTenants', 'claim A']);
      expect(store.committed).toHaveLength(1);
    });
  });
});
