import { FakeStore } from '../store/outbox-store.fake';
import { PROMOTE_MAX, RECHECK_POLLS, ScheduledPromoter } from './scheduled-promoter';

const A = '00000000-0000-4000-8000-00000000000a';

/** A promoter on a fake store and clock; `woken` counts its timer's wake-ups; `hearing` what it is told. */
function promoterOn(coalesceMs = 0): {
  promoter: ScheduledPromoter;
  store: FakeStore;
  woken: () => number;
  hearing: { now: boolean };
} {
  const store = new FakeStore();
  let wakes = 0;
  const hearing = { now: true };
  const promoter = new ScheduledPromoter(store, () => void wakes++, {
    coalesceMs,
    pollIntervalMs: 1000,
    hears: () => hearing.now,
    clock: { now: () => Date.now() },
  });
  return { promoter, store, woken: () => wakes, hearing };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe('ScheduledPromoter', () => {
  it('promotes at the first round, then only when asked: a relay sent no delayed events costs nothing more', async () => {
    const { promoter, store } = promoterOn();
    expect(promoter.isRequested).toBe(true);
    expect(await promoter.promoteIfRequested()).toEqual([]);
    // the relay's round awaits no promotion while none is requested (no turn of the event loop for it)
    expect(promoter.isRequested).toBe(false);
    await promoter.promoteIfRequested();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(1);
    promoter.request();
    expect(promoter.isRequested).toBe(true);
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(2);
    promoter.request();
    promoter.stop();
    expect(promoter.isRequested).toBe(false);
  });

  it('hands back the tenants promoted, and sets one timer for the next due event that wakes the relay then', async () => {
    const { promoter, store, woken } = promoterOn();
    store.promotions.push({ tenantIds: [A], promoted: 2, nextDueInMs: 500 });
    expect(await promoter.promoteIfRequested()).toEqual([A]);
    jest.advanceTimersByTime(499);
    expect(woken()).toBe(0);
    jest.advanceTimersByTime(1);
    expect(woken()).toBe(1);
    // the timer asked for the next round's promotion
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(2);
  });

  it('replaces its timer with the earliest time the last promotion read, and sets none when nothing is scheduled', async () => {
    const { promoter, store, woken } = promoterOn();
    store.promotions.push(
      { tenantIds: [], promoted: 0, nextDueInMs: 10_000 },
      { tenantIds: [], promoted: 0, nextDueInMs: 100 },
      { tenantIds: [], promoted: 0, nextDueInMs: null },
    );
    await promoter.promoteIfRequested();
    promoter.request();
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(100);
    expect(woken()).toBe(1);
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(60_000);
    expect(woken()).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('looks again at once after a full promotion, and shortly when the next is due but held by another relay', async () => {
    const { promoter, store, woken } = promoterOn();
    store.promotions.push(
      { tenantIds: [A], promoted: PROMOTE_MAX, nextDueInMs: -3 },
      { tenantIds: [], promoted: 0, nextDueInMs: -1 },
    );
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(0);
    expect(woken()).toBe(1);
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(4);
    expect(woken()).toBe(1);
    jest.advanceTimersByTime(1);
    expect(woken()).toBe(2);
  });

  it('promotes in a round driven by hand only while the last promotion said something is still scheduled', async () => {
    const { promoter, store } = promoterOn();
    store.promotions.push(
      { tenantIds: [], promoted: 0, nextDueInMs: 1_000 },
      { tenantIds: [], promoted: 0, nextDueInMs: null },
    );
    await promoter.promoteIfRequested();
    promoter.requestIfScheduled();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(2);
    promoter.requestIfScheduled();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(2);
  });

  it('fires its timer at most once per coalescing window: events due meanwhile wait for its end, together', async () => {
    const { promoter, store, woken } = promoterOn(100);
    store.promotions.push(
      { tenantIds: [], promoted: 0, nextDueInMs: 1_000 },
      { tenantIds: [A], promoted: 1, nextDueInMs: 10 },
      { tenantIds: [A], promoted: 9, nextDueInMs: 150 },
    );
    await promoter.promoteIfRequested();
    // after a quiet spell, the timer fires at the due instant itself
    jest.advanceTimersByTime(999);
    expect(woken()).toBe(0);
    jest.advanceTimersByTime(1);
    expect(woken()).toBe(1);
    await promoter.promoteIfRequested();
    // the next is due 10 ms later: the timer waits for the end of the window its firing began
    jest.advanceTimersByTime(99);
    expect(woken()).toBe(1);
    jest.advanceTimersByTime(1);
    expect(woken()).toBe(2);
    await promoter.promoteIfRequested();
    // due later than the window: at its instant
    jest.advanceTimersByTime(149);
    expect(woken()).toBe(2);
    jest.advanceTimersByTime(1);
    expect(woken()).toBe(3);
  });

  it('does not hold back an event already due that another relay holds, nor the rest of a full promotion', async () => {
    const { promoter, store, woken } = promoterOn(100);
    store.promotions.push({ tenantIds: [], promoted: 0, nextDueInMs: 50 });
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(50);
    expect(woken()).toBe(1);
    store.promotions.push({ tenantIds: [A], promoted: PROMOTE_MAX, nextDueInMs: -10 });
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(0);
    expect(woken()).toBe(2);
    store.promotions.push({ tenantIds: [], promoted: 0, nextDueInMs: -1 });
    await promoter.promoteIfRequested();
    jest.advanceTimersByTime(5);
    expect(woken()).toBe(3);
  });

  it('skips the promotion at a poll while it hears wake-ups, and rechecks every RECHECK_POLLS polls', async () => {
    const { promoter, store, hearing } = promoterOn();
    await promoter.promoteIfRequested();
    for (let poll = 1; poll < RECHECK_POLLS; poll++) {
      jest.advanceTimersByTime(1000);
      promoter.requestAtPoll();
      await promoter.promoteIfRequested();
    }
    expect(store.ops('promoteScheduled')).toHaveLength(1);
    jest.advanceTimersByTime(1000);
    promoter.requestAtPoll();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(2);
    // its listener is down: NOTIFYs may be lost, every poll promotes
    hearing.now = false;
    promoter.requestAtPoll();
    await promoter.promoteIfRequested();
    promoter.requestAtPoll();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(4);
  });

  it('clears its timer at stop and promotes no more', async () => {
    const { promoter, store, woken } = promoterOn();
    store.promotions.push({ tenantIds: [], promoted: 0, nextDueInMs: 100 });
    await promoter.promoteIfRequested();
    promoter.stop();
    promoter.stop();
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(1_000);
    expect(woken()).toBe(0);
    promoter.request();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(1);
  });

  it('asks again after a promotion that failed', async () => {
    const { promoter, store } = promoterOn();
    const failing = jest.spyOn(store, 'promoteScheduled').mockRejectedValueOnce(new Error('gone'));
    await expect(promoter.promoteIfRequested()).rejects.toThrow('gone');
    failing.mockRestore();
    await promoter.promoteIfRequested();
    expect(store.ops('promoteScheduled')).toHaveLength(1);
  });
});
