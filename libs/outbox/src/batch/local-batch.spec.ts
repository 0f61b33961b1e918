import { OutboxStallError } from '../errors/outbox.error';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import type { LeaseVacuum } from '../maintenance/lease-vacuum';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { RelayPolicy } from '../options/relay-policy';
import type { BatchClosing } from '../store/outbox-store.port';
import { FakeStore, fakeConsumer, fakeDelivery } from '../store/outbox-store.fake';
import { BackgroundWork } from './background-work';
import { InProcessDispatcher } from './in-process.dispatcher';
import { LocalBatch } from './local-batch';
import { OutcomeRecorder } from './outcome-recorder';
import { newTenantBatch, type Assigned } from './tenant-batch';

const T = '00000000-0000-4000-8000-00000000000a';

/** A local batch on a fake store, with the events `e1`…`e<n>`, one delivery each, and what their handler saw. */
function batchOf(
  n: number,
  policy: Pick<RelayPolicy, 'unguardedClosings' | 'optimisticBatches'> = {
    unguardedClosings: true,
    optimisticBatches: true,
  },
): {
  local: LocalBatch;
  store: FakeStore;
  work: { assigned: Assigned[]; unclaimed: [] };
  handled: string[];
} {
  const store = new FakeStore();
  const instrumentation = new OutboxInstrumentation();
  const handled: string[] = [];
  const consumer = fakeConsumer('a', { handle: (event) => void handled.push(event.eventId) });
  const local = new LocalBatch(
    store,
    new InProcessDispatcher(instrumentation),
    new OutcomeRecorder(store),
    { noteReleased: () => null } as unknown as LeaseVacuum,
    new BackgroundWork(),
    instrumentation,
    policy,
  );
  const assigned = Array.from({ length: n }, (_, i) => ({
    delivery: fakeDelivery(T, 'a', `e${i + 1}`),
    consumer,
  }));
  return { local, store, work: { assigned, unclaimed: [] }, handled };
}

/** The events of a batch closing. */
const eventsOf = (closing: BatchClosing): string[] =>
  closing.outcomes.map((o) => (o.deliveryId ?? '').replace(/^d-(e\d+)-a$/, '$1'));

/** A commit that fails while the batch holds event `eventId` (as a deferred constraint that event's handler broke). */
const failsWith =
  (eventId: string, error: Error) =>
  (closing: BatchClosing): Error | null =>
    eventsOf(closing).includes(eventId) ? error : null;

const violation = (): Error => Object.assign(new Error('duplicate key value'), { code: '23505' });
const statuses = (outcomes: DeliveryOutcome[]): [string, string][] =>
  outcomes.map((o) => [
    (o.deliveryId ?? '').slice(2, 4),
    `${o.status}${o.errorCode ? `:${o.errorCode}` : ''}`,
  ]);

describe('LocalBatch', () => {
  it('closes a batch that wrote nothing with the guard where the policy has no unguarded closings', async () => {
    const { local, store, work } = batchOf(2, { unguardedClosings: false, optimisticBatches: true });
    await local.run(store.tenantConnection(T), newTenantBatch(T), work, false);
    expect(store.ops('commitBatch').map((c) => (c.request as BatchClosing).noWrites)).toEqual([false]);
  });

  it('commits the outcomes of a batch whose handlers all succeed, in one commit', async () => {
    const { local, store, work, handled } = batchOf(3);
    const connection = store.tenantConnection(T);
    const batch = newTenantBatch(T);
    await local.run(connection, batch, work, false);
    expect(handled).toEqual(['e1', 'e2', 'e3']);
    expect(store.ops('commitBatch').map((c) => eventsOf(c.request as BatchClosing))).toEqual([
      ['e1', 'e2', 'e3'],
    ]);
    expect((store.ops('commitBatch')[0]!.request as BatchClosing).noWrites).toBe(true);
    expect(connection.released).toBe(true);
    expect(batch.result).toMatchObject({ succeeded: 3, failed: 0 });
  });

  describe('narrowing a batch that cannot be committed', () => {
    it('runs it again in halves, by event, until the event that fails it is alone, and charges that one only', async () => {
      const { local, store, work, handled } = batchOf(4);
      store.commitFails = failsWith('e3', violation());
      const connection = store.tenantConnection(T);
      const batch = newTenantBatch(T);
      await local.run(connection, batch, work, false);
      // the batch, then in careful mode: all of it, [e1 e2] | [e3 e4], [e3] | [e4]
      expect(store.ops('commitBatch').map((c) => eventsOf(c.request as BatchClosing))).toEqual([
        ['e1', 'e2', 'e3', 'e4'],
        ['e1', 'e2', 'e3', 'e4'],
        ['e1', 'e2'],
        ['e3', 'e4'],
        ['e3'],
        ['e4'],
      ]);
      // runs in parts are guarded whatever the handlers did
      expect(store.ops('commitBatch').map((c) => (c.request as BatchClosing).noWrites)).toEqual([
        true,
        false,
        false,
        false,
        false,
        false,
      ]);
      expect(handled.filter((e) => e === 'e1')).toHaveLength(3);
      // each part runs with its leases pushed back: those of the parts still to run
      expect(store.ops('extendEventLeases').map((e) => e.request)).toEqual([
        ['e1', 'e2', 'e3', 'e4'],
        ['e1', 'e2', 'e3', 'e4'],
        ['e3', 'e4'],
        ['e3', 'e4'],
        ['e4'],
      ]);
      expect(statuses(store.committed)).toEqual([
        ['e1', 'delivered'],
        ['e2', 'delivered'],
        ['e4', 'delivered'],
      ]);
      expect(statuses(store.recorded)).toEqual([['e3', 'failed:batchError']]);
      expect(batch.result).toMatchObject({ succeeded: 3, failed: 1 });
      expect(connection.released).toBe(true);
    });

    it('does not narrow a batch whose lease another relay took: every delivery is charged at once', async () => {
      const { local, store, work } = batchOf(3);
      store.commitFails = () => Object.assign(new Error('lease lost'), { code: 'OB001' });
      const batch = newTenantBatch(T);
      await local.run(store.tenantConnection(T), batch, work, false);
      expect(store.ops('commitBatch')).toHaveLength(1);
      expect(store.ops('extendEventLeases')).toHaveLength(0);
      expect(statuses(store.recorded)).toEqual([
        ['e1', 'failed:batchError'],
        ['e2', 'failed:batchError'],
        ['e3', 'failed:batchError'],
      ]);
      expect(batch.result).toMatchObject({ succeeded: 0, failed: 3 });
    });

    it('records nothing when the database stopped answering: the leases expire', async () => {
      const { local, store, work } = batchOf(2);
      store.commitFails = () => new OutboxStallError('no reply');
      const batch = newTenantBatch(T);
      await local.run(store.tenantConnection(T), batch, work, false);
      expect(store.recorded).toEqual([]);
      expect(store.committed).toEqual([]);
      expect(batch.result).toMatchObject({ succeeded: 0, failed: 0 });
    });
  });
});
