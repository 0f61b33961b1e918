import { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import { BackgroundWork } from '../batch/background-work';
import type { ExternalDispatcher } from '../batch/external.dispatcher';
import { ExternalBatch } from '../batch/external-batch';
import { InProcessDispatcher } from '../batch/in-process.dispatcher';
import { LocalBatch } from '../batch/local-batch';
import { OutcomeRecorder } from '../batch/outcome-recorder';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import type { LeaseVacuum } from '../maintenance/lease-vacuum';
import { delivered } from '../model/delivery-outcome';
import type { DueTenant } from '../model/due-tenant';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxRelayOptions } from '../options/outbox-module-options.interface';
import { relayPolicy, type RelayPolicy } from '../options/relay-policy';
import type { ClaimRequest } from '../store/outbox-store.port';
import {
  claimAnswer,
  FakeClock,
  FakeStore,
  fakeConsumer,
  fakeDelivery,
  NOTHING_CLAIMED,
} from '../store/outbox-store.fake';
import { TenantRound } from './tenant-round';

const T = '00000000-0000-4000-8000-00000000000a';

/** A tenant round on a fake store and clock, with the real local and external batches around it. */
function round(
  consumers: OutboxConsumer[],
  {
    relay = {},
    tenantConsumers = [],
    switches = {},
  }: { relay?: OutboxRelayOptions; tenantConsumers?: OutboxConsumer[]; switches?: Partial<RelayPolicy> } = {},
): {
  round: TenantRound;
  store: FakeStore;
  clock: FakeClock;
  sent: string[];
  instrumentation: OutboxInstrumentation;
} {
  const { options } = resolveOutboxOptions({ relay });
  const policy = relayPolicy(options, switches);
  const store = new FakeStore();
  const clock = new FakeClock();
  const registry = new OutboxConsumerRegistry();
  registry.load(consumers);
  if (tenantConsumers.length > 0)
    registry.addTenantSource({ consumersForTenant: () => Promise.resolve(tenantConsumers) });
  const instrumentation = new OutboxInstrumentation();
  const background = new BackgroundWork();
  const recorder = new OutcomeRecorder(store);
  const leaseVacuum = { noteReleased: () => null } as unknown as LeaseVacuum;
  const local = new LocalBatch(
    store,
    new InProcessDispatcher(instrumentation),
    recorder,
    leaseVacuum,
    background,
    instrumentation,
    policy,
  );
  const sent: string[] = [];
  const external = {
    dispatch: (remote: { delivery: Parameters<typeof delivered>[0] }[]) => {
      sent.push(...remote.map((r) => r.delivery.consumerName));
      return Promise.resolve(remote.map((r) => delivered(r.delivery)));
    },
  } as unknown as ExternalDispatcher;
  const tenantRound = new TenantRound(
    options,
    registry,
    store,
    local,
    new ExternalBatch(options, store, external),
    recorder,
    background,
    instrumentation,
    clock,
    policy,
  );
  return { round: tenantRound, store, clock, sent, instrumentation };
}

const newEvents: DueTenant = { tenantId: T, hasNew: true, hasDue: false };
const dueOnly: DueTenant = { tenantId: T, hasNew: false, hasDue: true };

/** The requests of the claims the store was asked for, in order. */
const claims = (store: FakeStore): ClaimRequest[] => store.ops('claim').map((c) => c.request as ClaimRequest);

describe('TenantRound', () => {
  describe('what it claims', () => {
    it('takes new events by the lean claim when every consumer is in-process and none is ordered', async () => {
      const { round: r, store } = round([fakeConsumer('a'), fakeConsumer('b')]);
      await r.visit(newEvents, false);
      expect(claims(store)).toEqual([
        expect.objectContaining({
          tenantId: T,
          newEvents: 'lean',
          due: false,
          hosted: ['a', 'b'],
          inProcess: ['a', 'b'],
          limit: 100,
          beginBatch: true,
        }),
      ]);
    });

    it('fans out where the policy has no lean claim', async () => {
      const { round: r, store } = round([fakeConsumer('a')], { switches: { leanClaim: false } });
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.newEvents)).toEqual(['fanOut']);
    });

    it('fans out when a consumer is not in-process, and begins no batch transaction without handlers', async () => {
      const { round: r, store } = round([fakeConsumer('hook', { kind: 'webhook' })]);
      await r.visit(newEvents, false);
      expect(claims(store)).toEqual([
        expect.objectContaining({ newEvents: 'fanOut', due: false, beginBatch: false }),
      ]);
    });

    it("fans out to the tenant's own consumers too", async () => {
      const scoped = fakeConsumer('tenant-hook', { kind: 'webhook' });
      const { round: r, store } = round([fakeConsumer('a')], { tenantConsumers: [scoped] });
      await r.visit(newEvents, false);
      expect(claims(store)).toEqual([
        expect.objectContaining({
          newEvents: 'fanOut',
          hosted: ['a', 'tenant-hook'],
          tenantConsumers: [scoped],
        }),
      ]);
    });

    it('claims due deliveries when the scan says so, or with new events when a consumer is ordered', async () => {
      const plain = round([fakeConsumer('a')]);
      await plain.round.visit(dueOnly, false);
      expect(claims(plain.store)).toEqual([expect.objectContaining({ newEvents: null, due: true })]);
      const ordered = round([fakeConsumer('a', { ordered: true })]);
      await ordered.round.visit(newEvents, false);
      expect(claims(ordered.store)).toEqual([expect.objectContaining({ newEvents: 'fanOut', due: true })]);
    });

    it('falls back to the fan-out in the same visit when the lean claim says another consumer routes the events, and keeps to it for 30 s', async () => {
      const { round: r, store, clock } = round([fakeConsumer('a')]);
      store.claims.push({ ...NOTHING_CLAIMED, fallback: 'routes' });
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.newEvents)).toEqual(['lean', 'fanOut']);
      clock.advance(29_999);
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.newEvents)).toEqual(['lean', 'fanOut', 'fanOut']);
      clock.advance(1);
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.newEvents)).toEqual(['lean', 'fanOut', 'fanOut', 'lean']);
    });

    it('after a fallback for a stale lease, goes back to the lean claim at the next visit', async () => {
      const { round: r, store } = round([fakeConsumer('a')]);
      store.claims.push({ ...NOTHING_CLAIMED, fallback: 'stale' });
      await r.visit(newEvents, false);
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.newEvents)).toEqual(['lean', 'fanOut', 'lean']);
    });

    it('hands the fresh deliveries over as the claim gave them when no due one came with them (no copy)', async () => {
      const made = round([fakeConsumer('a')]);
      const seen: unknown[] = [];
      made.instrumentation.add({ batchClaimed: ({ deliveries }) => seen.push(deliveries) });
      const fresh = claimAnswer([fakeDelivery(T, 'a', 'e1')]);
      const due = fakeDelivery(T, 'a', 'e2');
      made.store.claims.push(fresh, claimAnswer([fakeDelivery(T, 'a', 'e3')], 1, { due: [due] }));
      await made.round.visit(newEvents, false);
      await made.round.visit({ tenantId: T, hasNew: true, hasDue: true }, false);
      expect(seen[0]).toBe(fresh.fresh.deliveries);
      // with due ones: one list of both, the fresh first
      expect((seen[1] as { eventId: string }[]).map((d) => d.eventId)).toEqual(['e3', 'e2']);
    });

    it('tells its observers why a claim of new events took the fan-out, and null when it did not', async () => {
      const reasons = async (
        made: ReturnType<typeof round>,
        visits: DueTenant[],
        answers: Parameters<FakeStore['claims']['push']>[0][] = [],
      ): Promise<(string | null)[]> => {
        const seen: (string | null)[] = [];
        made.instrumentation.add({ batchClaimed: ({ fanOut }) => seen.push(fanOut) });
        made.store.claims.push(...answers);
        for (const visit of visits) await made.round.visit(visit, false);
        return seen;
      };
      const both: DueTenant = { tenantId: T, hasNew: true, hasDue: true };
      expect(await reasons(round([fakeConsumer('a')]), [newEvents, dueOnly])).toEqual([null, null]);
      expect(
        await reasons(round([fakeConsumer('a')], { switches: { leanClaim: false } }), [newEvents]),
      ).toEqual(['policy']);
      expect(await reasons(round([fakeConsumer('a')]), [both])).toEqual(['due']);
      expect(await reasons(round([fakeConsumer('a', { ordered: true })]), [newEvents])).toEqual([
        'orderedOrLimited',
      ]);
      expect(
        await reasons(
          round([fakeConsumer('a')], { tenantConsumers: [fakeConsumer('t', { kind: 'webhook' })] }),
          [newEvents],
        ),
      ).toEqual(['tenantConsumers']);
      expect(
        await reasons(round([fakeConsumer('a'), fakeConsumer('h', { kind: 'webhook' })]), [newEvents]),
      ).toEqual(['notInProcess']);
      expect(
        await reasons(
          round([fakeConsumer('a')]),
          [newEvents, newEvents],
          [{ ...NOTHING_CLAIMED, fallback: 'routes' }],
        ),
      ).toEqual(['routes', 'refused']);
      expect(
        await reasons(
          round([fakeConsumer('a')]),
          [newEvents, newEvents],
          [
            { ...NOTHING_CLAIMED, fallback: 'stale' },
            NOTHING_CLAIMED,
            { ...NOTHING_CLAIMED, fallback: 'unrouted' },
          ],
        ),
      ).toEqual(['stale', 'unrouted']);
    });

    it('claims again, three times at most, while a claim finds only events other relays just leased', async () => {
      const { round: r, store } = round([fakeConsumer('a')]);
      const lostOnly = claimAnswer([], 0, { fresh: { deliveries: [], events: 0, lost: 2 } });
      store.claims.push(lostOnly, lostOnly, lostOnly, lostOnly);
      const visit = await r.visit(newEvents, false);
      expect(claims(store)).toHaveLength(3);
      expect(visit.result.eventsClaimed).toBe(0);
    });
  });

  describe('what it does with what it claimed', () => {
    it('gives the connection back without a batch when nothing was claimed', async () => {
      const { round: r, store } = round([fakeConsumer('a')]);
      const visit = await r.visit(newEvents, false);
      await visit.settled;
      expect(store.log.map((e) => e.op)).toEqual(['claim', 'release']);
      expect(visit.result).toMatchObject({ tenants: 1, eventsClaimed: 0, deliveriesClaimed: 0 });
    });

    it('runs in-process deliveries in the batch transaction and records their outcomes with its commit', async () => {
      const handled: string[] = [];
      const handler = fakeConsumer('a', { handle: (event) => void handled.push(event.eventId) });
      const { round: r, store } = round([handler]);
      store.claims.push(claimAnswer([fakeDelivery(T, 'a', 'e1'), fakeDelivery(T, 'a', 'e2')]));
      const visit = await r.visit(newEvents, false);
      await visit.settled;
      expect(handled).toEqual(['e1', 'e2']);
      expect(store.log.map((e) => e.op)).toEqual(['claim', 'commitBatch', 'release']);
      expect(store.committed.map((o) => o.status)).toEqual(['delivered', 'delivered']);
      expect(visit.result).toMatchObject({ eventsClaimed: 2, deliveriesClaimed: 2, succeeded: 2, failed: 0 });
    });

    it('sends remote deliveries with no connection held, then records them in a transaction of their own', async () => {
      const { round: r, store, sent } = round([fakeConsumer('hook', { kind: 'webhook' })]);
      store.claims.push(claimAnswer([fakeDelivery(T, 'hook', 'e1')]));
      const visit = await r.visit(newEvents, false);
      expect(sent).toEqual(['hook']);
      expect(store.log.map((e) => [e.op, e.request ?? null])).toEqual([
        ['claim', expect.anything()],
        ['release', null],
        ['recordOutcomes', null],
      ]);
      expect(visit.result).toMatchObject({ deliveriesClaimed: 1, succeeded: 1 });
    });

    it('gives back a delivery whose consumer is gone, and ends one whose attempts kept dying, on its connection', async () => {
      const { round: r, store } = round([fakeConsumer('hook', { kind: 'webhook' })]);
      store.claims.push(
        claimAnswer([
          fakeDelivery(T, 'gone', 'e1'),
          fakeDelivery(T, 'hook', 'e2', { recovered: true, attempt: 4 }),
        ]),
      );
      const visit = await r.visit(newEvents, false);
      expect(store.recorded.map((o) => [o.status, o.errorCode])).toEqual([
        ['deferred', 'consumerUnavailable'],
        ['dead', 'staleLeaseRecovered'],
      ]);
      expect(store.log.map((e) => [e.op, e.request ?? null])).toEqual([
        ['claim', expect.anything()],
        ['recordOutcomes', 'on its connection'],
        ['release', null],
      ]);
      expect(visit.result).toMatchObject({ failed: 1, dead: 1 });
    });
  });

  describe('claim sizes', () => {
    const full = (n: number): ReturnType<typeof claimAnswer> =>
      claimAnswer(Array.from({ length: n }, (_, i) => fakeDelivery(T, 'a', `e${i}`)));

    it("claims twice as much after a full batch of handlers that wrote nothing and took under 100 ms on the relay's clock", async () => {
      const { round: r, store } = round([fakeConsumer('a')], { relay: { batchSize: 4, maxBatchSize: 16 } });
      store.claims.push(full(4), full(8));
      await r.visit(newEvents, false);
      await r.visit(newEvents, false);
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.limit)).toEqual([4, 8, 16]);
    });

    it('keeps every claim at relay.batchSize where the policy has no claim growth', async () => {
      const { round: r, store } = round([fakeConsumer('a')], {
        relay: { batchSize: 4, maxBatchSize: 16 },
        switches: { claimGrowth: null },
      });
      store.claims.push(full(4), full(4));
      await r.visit(newEvents, false);
      await r.visit(newEvents, false);
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.limit)).toEqual([4, 4, 4]);
    });

    it('does not grow the claims of a tenant whose full batches take 100 ms or more', async () => {
      const clocks: FakeClock[] = [];
      const slow = fakeConsumer('a', { handle: () => clocks[0]!.advance(100) });
      const made = round([slow], { relay: { batchSize: 4, maxBatchSize: 16 } });
      clocks.push(made.clock);
      made.store.claims.push(full(4), full(4));
      await made.round.visit(newEvents, false);
      await made.round.visit(newEvents, false);
      expect(claims(made.store).map((c) => c.limit)).toEqual([4, 4]);
    });

    it('claims half as much, at once, after a claim that outlived its statement bound', async () => {
      const { round: r, store } = round([fakeConsumer('a')], { relay: { batchSize: 8 } });
      store.claims.push(
        Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
      );
      await r.visit(newEvents, false);
      await r.visit(newEvents, false);
      expect(claims(store).map((c) => c.limit)).toEqual([8, 4, 4]);
    });

    it("a claim held to a light tenant's share leaves the lane's claims at relay.batchSize for the others", async () => {
      const { round: r, store } = round([fakeConsumer('a')], { relay: { batchSize: 8 } });
      const heavy = '00000000-0000-4000-8000-00000000000b';
      store.claims.push(full(2), full(8));
      await r.visit({ ...newEvents, share: 2 }, false);
      await r.visit({ tenantId: heavy, hasNew: true, hasDue: false, share: 8 }, false);
      await r.visit({ tenantId: heavy, hasNew: true, hasDue: false }, false);
      expect(claims(store).map((c) => c.limit)).toEqual([2, 8, 8]);
    });

    it('gives up on a claim of one event that outlived its bound, and any other failure, and releases', async () => {
      const { round: r, store } = round([fakeConsumer('a')], { relay: { batchSize: 1 } });
      store.claims.push(Object.assign(new Error('timeout'), { code: '57014' }));
      await expect(r.visit(newEvents, false)).rejects.toThrow('timeout');
      expect(store.log.map((e) => e.op)).toEqual(['claim', 'release']);
    });
  });
});
