import { delivered } from '../model/delivery-outcome';
import { resolveOutboxOptions } from '../options/outbox-options';
import { FakeStore, fakeConsumer, fakeDelivery } from '../store/outbox-store.fake';
import { ExternalBatch } from './external-batch';
import type { ExternalDispatcher } from './external.dispatcher';
import { OutcomeRecorder } from './outcome-recorder';
import { newTenantBatch, type Assigned } from './tenant-batch';

const T = '00000000-0000-4000-8000-00000000000a';
const hook = fakeConsumer('hook', { kind: 'webhook' });
const remote = (eventId: string, deliveryId: string | null = `d-${eventId}`): Assigned => ({
  delivery: fakeDelivery(T, 'hook', eventId, { deliveryId }),
  consumer: hook,
});

describe('ExternalBatch', () => {
  afterEach(() => jest.useRealTimers());

  it('pushes the leases of its delivery rows back every third of a lease while they are sent, and stops after', async () => {
    jest.useFakeTimers();
    const { options } = resolveOutboxOptions({ relay: { leaseMs: 3_000 } });
    const store = new FakeStore();
    let answer!: () => void;
    const external = {
      dispatch: (sent: Assigned[]) =>
        new Promise((resolve) => {
          answer = () => resolve(sent.map((a) => delivered(a.delivery)));
        }),
    } as unknown as ExternalDispatcher;
    const sending = new ExternalBatch(options, store, external)
      .hold(newTenantBatch(T), [remote('e1'), remote('e2', null)])
      .send();
    await jest.advanceTimersByTimeAsync(999);
    expect(store.ops('extendLeases')).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(1);
    await jest.advanceTimersByTimeAsync(1_000);
    // the delivery rows only: a pair without one has no lease of its own
    expect(store.ops('extendLeases')).toEqual([
      { op: 'extendLeases', tenantId: T, request: ['d-e1'] },
      { op: 'extendLeases', tenantId: T, request: ['d-e1'] },
    ]);
    answer();
    await expect(sending).resolves.toHaveLength(2);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(store.ops('extendLeases')).toHaveLength(2);
  });

  it('keeps the leases from hold() on, before the send (deliveries waiting for the in-process batch), until stopped', async () => {
    jest.useFakeTimers();
    const { options } = resolveOutboxOptions({ relay: { leaseMs: 3_000 } });
    const store = new FakeStore();
    const external = {
      dispatch: (sent: Assigned[]) => Promise.resolve(sent.map((a) => delivered(a.delivery))),
    } as unknown as ExternalDispatcher;
    const held = new ExternalBatch(options, store, external).hold(newTenantBatch(T), [remote('e1')]);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(store.ops('extendLeases')).toHaveLength(2);
    held.stop();
    await jest.advanceTimersByTimeAsync(5_000);
    expect(store.ops('extendLeases')).toHaveLength(2);
  });
});

describe('OutcomeRecorder', () => {
  const outcomes = [delivered(fakeDelivery(T, 'hook', 'e1')), delivered(fakeDelivery(T, 'hook', 'e2'))];

  it('records on the batch connection while it is held, in a transaction of its own once it is released', async () => {
    const store = new FakeStore();
    const recorder = new OutcomeRecorder(store);
    const connection = store.tenantConnection(T);
    await recorder.record(newTenantBatch(T), outcomes, connection);
    await connection.release();
    await recorder.record(newTenantBatch(T), outcomes, connection);
    expect(store.log.map((e) => [e.op, e.request ?? null])).toEqual([
      ['recordOutcomes', 'on its connection'],
      ['release', null],
      ['recordOutcomes', null],
    ]);
  });

  it('counts what the store says it recorded, the rest as leases lost, and never throws', async () => {
    const store = new FakeStore();
    store.recordOutcomes = () => Promise.resolve({ recorded: 1 });
    const recorder = new OutcomeRecorder(store);
    const batch = newTenantBatch(T);
    await recorder.record(batch, outcomes);
    expect(batch.result).toMatchObject({ succeeded: 2, leaseLost: 1 });
    store.recordOutcomes = () => Promise.reject(new Error('connection lost'));
    const failing = newTenantBatch(T);
    await expect(recorder.record(failing, outcomes)).resolves.toBeUndefined();
    expect(failing.result).toMatchObject({ succeeded: 0, leaseLost: 0 });
  });
});
