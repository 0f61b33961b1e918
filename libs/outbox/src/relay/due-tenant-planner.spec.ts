import type { DueTenant } from '../model/due-tenant';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxRelayOptions } from '../options/outbox-module-options.interface';
import { FakeClock, FakeStore } from '../store/outbox-store.fake';
import { DueTenantPlanner } from './due-tenant-planner';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';
const C = '00000000-0000-4000-8000-00000000000c';

const due = (tenantId: string, kind: Partial<DueTenant> = {}): DueTenant => ({
  tenantId,
  hasNew: true,
  hasDue: false,
  ...kind,
});

/** A planner on a fake store and clock, and what its rounds visited: one list per `visit` call. */
function planner(
  relay: OutboxRelayOptions = {},
  pacedScans = true,
): {
  planner: DueTenantPlanner;
  store: FakeStore;
  clock: FakeClock;
  round: (stopping?: boolean) => Promise<{ visits: DueTenant[][]; more: boolean }>;
} {
  const store = new FakeStore();
  const clock = new FakeClock();
  const { options } = resolveOutboxOptions({ relay });
  const p = new DueTenantPlanner(options, store, clock, pacedScans);
  const round = async (stopping = false): Promise<{ visits: DueTenant[][]; more: boolean }> => {
    const visits: DueTenant[][] = [];
    const more = await p.plan(
      (tenants) => {
        visits.push([...tenants]);
        return Promise.resolve();
      },
      () => stopping,
    );
    return { visits, more };
  };
  return { planner: p, store, clock, round };
}

describe('DueTenantPlanner', () => {
  it('with no tenant named, scans for due tenants and visits what the scan found', async () => {
    const { store, round } = planner();
    store.scans.push([due(A), due(B, { hasNew: false, hasDue: true })]);
    const { visits, more } = await round();
    expect(visits).toEqual([[], [due(A), due(B, { hasNew: false, hasDue: true })]]);
    expect(store.ops('dueTenants')).toEqual([{ op: 'dueTenants', request: { limit: 100, after: null } }]);
    expect(more).toBe(false);
  });

  it('visits the tenants a wake-up named first, for their new events, before any scan', async () => {
    const { planner: p, store, round } = planner();
    p.hint([A, 'not-a-uuid', B.toUpperCase()]);
    store.scans.push([]);
    const { visits } = await round();
    expect(visits[0]).toEqual([due(A, { backlog: false }), due(B, { backlog: false })]);
    // the first scan has not listed every due tenant yet: it runs after them
    expect(store.ops('dueTenants')).toHaveLength(1);
  });

  it('with pacedScans off, skips the scan while the last one listed every due tenant less than 100 ms ago, on its clock', async () => {
    const { planner: p, store, clock, round } = planner({}, false);
    await round(); // a complete scan (nothing due)
    p.hint([A]);
    clock.advance(99);
    expect((await round()).visits).toEqual([[due(A, { backlog: false })]]);
    expect(store.ops('dueTenants')).toHaveLength(1);
    p.hint([A]);
    clock.advance(1);
    expect((await round()).visits).toHaveLength(2);
    expect(store.ops('dueTenants')).toHaveLength(2);
  });

  it("paces the scan of wake-ups' rounds to the poll interval, unless a named tenant has a backlog: then every 100 ms", async () => {
    const { planner: p, store, clock, round } = planner({ pollIntervalMs: 1000 });
    await round(); // a complete scan (nothing due)
    for (let ms = 100; ms < 1000; ms += 100) {
      clock.advance(100);
      p.hint([A]);
      expect((await round()).visits).toEqual([[due(A, { backlog: false })]]);
    }
    expect(store.ops('dueTenants')).toHaveLength(1);
    // a poll interval after the last scan: the wake-up's round scans after its tenant
    clock.advance(100);
    p.hint([A]);
    expect((await round()).visits).toHaveLength(2);
    expect(store.ops('dueTenants')).toHaveLength(2);
    // a tenant whose batch came back full: its next rounds scan once the last scan is 100 ms old
    p.noteFull(A);
    clock.advance(99);
    expect((await round()).visits).toEqual([[due(A, { backlog: true })]]);
    expect(store.ops('dueTenants')).toHaveLength(2);
    p.noteFull(A);
    clock.advance(1);
    expect((await round()).visits).toHaveLength(2);
    expect(store.ops('dueTenants')).toHaveLength(3);
  });

  it("runs its scan beside the named tenants' visits, not after them: the round does not wait for both in turn", async () => {
    const { planner: p, store } = planner();
    let release!: () => void;
    const slowScan = new Promise<void>((resolve) => (release = resolve));
    const scanned = jest.spyOn(store, 'dueTenants').mockImplementation(async () => {
      await slowScan;
      return [due(C)];
    });
    p.hint([A]);
    let scanDuringVisit = false;
    const visits: DueTenant[][] = [];
    const planned = p.plan(
      async (tenants) => {
        visits.push([...tenants]);
        if (visits.length === 1) {
          scanDuringVisit = scanned.mock.calls.length === 1;
          release();
        }
        return Promise.resolve();
      },
      () => false,
    );
    await planned;
    expect(scanDuringVisit).toBe(true);
    expect(visits).toEqual([[due(A, { backlog: false })], [due(C)]]);
  });

  it("lets a scan under way fail the round only once the named tenants' visits are done", async () => {
    const { planner: p, store } = planner();
    jest.spyOn(store, 'dueTenants').mockRejectedValue(new Error('scan failed'));
    p.hint([A]);
    const visited: string[] = [];
    await expect(
      p.plan(
        async (tenants) => {
          await new Promise((resolve) => setImmediate(resolve));
          visited.push(...tenants.map((t) => t.tenantId));
        },
        () => false,
      ),
    ).rejects.toThrow('scan failed');
    expect(visited).toEqual([A]);
  });

  it('visits the tenants a promotion made due without a scan until the last is a poll old, unless others were named too (pacedScans off)', async () => {
    const { planner: p, store, clock, round } = planner({ pollIntervalMs: 1000 }, false);
    await round();
    clock.advance(999);
    p.hintPromoted([A, B]);
    expect((await round()).visits).toEqual([[due(A, { backlog: false }), due(B, { backlog: false })]]);
    expect(store.ops('dueTenants')).toHaveLength(1);
    // a poll interval after the last scan: the promotion's round scans after its tenants
    clock.advance(1);
    p.hintPromoted([A]);
    expect((await round()).visits).toHaveLength(2);
    expect(store.ops('dueTenants')).toHaveLength(2);
    // named by a wake-up as well: the round is a wake-up's, and a scan older than 100 ms runs after them
    clock.advance(100);
    p.hint([C]);
    p.hintPromoted([A]);
    expect((await round()).visits).toHaveLength(2);
    clock.advance(100);
    p.hintPromoted([A]);
    p.hint([C]);
    expect((await round()).visits).toHaveLength(2);
    expect(store.ops('dueTenants')).toHaveLength(4);
    // a promotion that made nothing due leaves the round as it was: no tenant named, it scans
    p.hintPromoted([]);
    await round();
    expect(store.ops('dueTenants')).toHaveLength(5);
  });

  it('scans every round in which no tenant was named, however fresh the last scan', async () => {
    const { store, round } = planner();
    await round();
    await round();
    expect(store.ops('dueTenants')).toHaveLength(2);
  });

  it('revisits a named tenant after the scan only for its due deliveries', async () => {
    const { planner: p, store, round } = planner();
    p.hint([A, B]);
    store.scans.push([due(A, { hasDue: true }), due(B), due(C)]);
    const { visits } = await round();
    expect(visits[1]).toEqual([due(A, { hasNew: false, hasDue: true }), due(C)]);
  });

  it('after the scan, revisits a tenant a lane visited late in the round only for its due deliveries', async () => {
    const { planner: p, store } = planner();
    p.noteFull(A);
    store.scans.push([due(B), due(C, { hasDue: true }), due(A)]);
    const visits: DueTenant[][] = [];
    await p.plan(
      (tenants) => {
        visits.push([...tenants]);
        // B and C woken while A's batch runs, and visited late by a free lane
        if (visits.length === 1) {
          p.hint([B, C]);
          expect(p.takeWoken(() => false)).toEqual(due(B));
          expect(p.takeWoken(() => false)).toEqual(due(C));
        }
        return Promise.resolve();
      },
      () => false,
    );
    expect(visits).toEqual([[due(A, { backlog: true })], [due(C, { hasNew: false, hasDue: true })]]);
  });

  it('scans from a cursor when a scan lists as many tenants as a round visits, and says more are due', async () => {
    const { store, round } = planner({ maxTenantsPerRound: 2 });
    store.scans.push([due(A), due(B)], [due(C)]);
    expect((await round()).more).toBe(true);
    expect((await round()).more).toBe(false);
    await round();
    expect(store.ops('dueTenants').map((s) => s.request)).toEqual([
      { limit: 2, after: null },
      { limit: 2, after: B },
      { limit: 2, after: null },
    ]);
  });

  it('leaves too many named tenants to the scan', async () => {
    const { planner: p, store, round } = planner({ maxTenantsPerRound: 2 });
    p.hint([A, B, C]);
    store.scans.push([due(C)]);
    expect((await round()).visits).toEqual([[], [due(C)]]);
  });

  it('brings a tenant whose batch came back full first in the next round, marked with a backlog', async () => {
    const { planner: p, round } = planner();
    p.noteFull(A);
    const { visits } = await round();
    expect(visits[0]).toEqual([due(A, { backlog: true })]);
    // once only: the next round goes by the scan
    expect((await round()).visits[0]).toEqual([]);
  });

  it('does not scan once the relay is stopping', async () => {
    const { store, round } = planner();
    await round(true);
    expect(store.ops('dueTenants')).toHaveLength(0);
  });

  it('visits the tenants relay.tenants supplies, for both kinds of work, and never scans', async () => {
    const { planner: p, store, round } = planner({ tenants: () => Promise.resolve([A, 'nope', B]) });
    p.hint([C]);
    const { visits, more } = await round();
    expect(visits).toEqual([[due(A, { hasDue: true }), due(B, { hasDue: true })]]);
    expect(more).toBe(false);
    expect(store.log).toEqual([]);
    // the named tenant was forgotten: the next round visits the supplied ones only
    expect((await round()).visits).toEqual([[due(A, { hasDue: true }), due(B, { hasDue: true })]]);
  });

  it('hands a lane the tenants woken during the round, except the busy and backlogged ones, once each', async () => {
    const { planner: p, round } = planner();
    p.noteFull(A);
    p.hint([B.toUpperCase(), A, C]);
    const busy = (tenantId: string): boolean => tenantId === C;
    expect(p.takeWoken(busy)).toEqual({ tenantId: B, hasNew: true, hasDue: false });
    expect(p.takeWoken(busy)).toBeUndefined();
    // taken, B is not visited again by the next round; A (backlogged) and C (busy) are
    const { visits } = await round();
    expect(visits[0]!.map((v) => v.tenantId)).toEqual([A, C]);
  });
});
