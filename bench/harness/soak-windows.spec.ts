import { holdEffect, judgeSoak, soakWindow, type SoakReading, type SoakWindow } from './soak-windows';

const MiB = 1024 * 1024;

function reading(atS: number, overrides: Partial<SoakReading> = {}): SoakReading {
  return {
    atS,
    tables: {
      event_outbox: { tableBytes: 2 * MiB, indexBytes: MiB, deadTuples: 100, deletedTuples: 0 },
      outbox_deliveries: { tableBytes: 4 * MiB, indexBytes: 2 * MiB, deadTuples: 50, deletedTuples: 0 },
    },
    produced: 0,
    handled: 0,
    nodeCpuMs: 0,
    relayBackendCpuMs: 0,
    producerBackendCpuMs: 0,
    rssBytes: 100 * MiB,
    loadAverage: 1.5,
    claims: { calls: 0, execMs: 0 },
    dueScans: { calls: 0, execMs: 0 },
    ...overrides,
  };
}

/** A window with the figures the goals look at; the rest as an empty window has them. */
function window(index: number, figures: Partial<SoakWindow>): SoakWindow {
  return {
    ...soakWindow(index, reading(index * 10), reading(index * 10 + 10), [], null),
    ...figures,
  };
}

describe('soakWindow', () => {
  it("counts the relay's fan-outs of the window by reason, those that happened only", () => {
    const before = reading(0, { fanOuts: { stale: 2, routes: 5 } });
    const after = reading(60, { fanOuts: { stale: 14, routes: 5, unrouted: 1 } });
    expect(soakWindow(0, before, after, [], null).fanOuts).toEqual({ stale: 12, unrouted: 1 });
    expect(soakWindow(0, reading(0), reading(60), [], null).fanOuts).toBeNull();
  });

  it('takes rates, CPU per event and claim means from the difference of two readings', () => {
    // counters that grow k times over: 6,000 events handled between the two readings, 15 s apart
    const at = (atS: number, k: number): SoakReading =>
      reading(atS, {
        produced: 1100 * k,
        handled: 1000 * k,
        nodeCpuMs: 500 * k,
        relayBackendCpuMs: 200 * k,
        producerBackendCpuMs: 100 * k,
        claims: { calls: 10 * k, execMs: 2 * k },
        dueScans: { calls: 4 * k, execMs: 8 * k },
      });
    const before = at(60, 1);
    const after = at(75, 7);
    const w = soakWindow(3, before, after, [1, 2, 3, 4, 100], null);
    expect(w).toMatchObject({
      index: 3,
      startS: 60,
      endS: 75,
      eventsPerS: 400,
      backlog: 700,
      latencyCount: 5,
    });
    expect(w.nodeCpuPerEventMs).toBeCloseTo(0.5);
    expect(w.nodeCores).toBeCloseTo(0.2);
    expect(w.relayBackendCpuPerEventMs).toBeCloseTo(0.2);
    expect(w.producerBackendCpuPerEventMs).toBeCloseTo(0.1);
    expect(w.claimMeanMs).toBeCloseTo(0.2);
    expect(w.claimCalls).toBe(60);
    expect(w.dueScanMeanMs).toBeCloseTo(2);
    expect(w.p50Ms).toBe(3);
    expect(w.p99Ms).toBe(100);
  });

  it('sums the outbox tables, and counts the events table deletes as purged events', () => {
    const after = reading(15);
    after.tables.event_outbox!.deletedTuples = 1200;
    after.tables.outbox_deliveries!.deletedTuples = 2400;
    const w = soakWindow(0, reading(0), after, [], null);
    expect(w.tableBytes).toBe(6 * MiB);
    expect(w.indexBytes).toBe(3 * MiB);
    expect(w.sizeBytes).toBe(9 * MiB);
    expect(w.deadTuples).toBe(150);
    expect(w.deadByTable).toEqual({ event_outbox: 100, outbox_deliveries: 50 });
    expect(w.purgedEvents).toBe(1200);
  });

  it('counts the deletes of the events table’s partitions in the partitioned layout', () => {
    const before = reading(0);
    before.tables.event_outbox_default = { tableBytes: 0, indexBytes: 0, deadTuples: 0, deletedTuples: 0 };
    before.tables.event_outbox_p20261206t0000 = {
      tableBytes: 0,
      indexBytes: 0,
      deadTuples: 0,
      deletedTuples: 0,
    };
    const after = structuredClone(before);
    after.atS = 15;
    after.tables.event_outbox_default!.deletedTuples = 300;
    after.tables.event_outbox_p20261206t0000!.deletedTuples = 900;
    after.tables.outbox_deliveries!.deletedTuples = 2400;
    expect(soakWindow(0, before, after, [], null).purgedEvents).toBe(1200);
  });

  it('counts the events table’s ranges kept, made and dropped; a dropped range’s deletes leave the window’s count alone', () => {
    const empty = { tableBytes: 0, indexBytes: 0, deadTuples: 0, deletedTuples: 0 };
    const before = reading(0);
    before.tables.event_outbox_p20261206t0800 = { ...empty, deletedTuples: 500 };
    before.tables.event_outbox_p20261206t0801 = { ...empty };
    before.tables.outbox_deliveries_p20261206t0800 = { ...empty };
    const after = reading(60);
    after.tables.event_outbox_p20261206t0801 = { ...empty, deletedTuples: 40 };
    after.tables.event_outbox_p20261206t0802 = { ...empty, deletedTuples: 2 };
    after.tables.event_outbox_p20261206t0803 = { ...empty };
    after.tables.outbox_deliveries_p20261206t0803 = { ...empty };
    const w = soakWindow(0, before, after, [], null);
    expect({ ranges: w.ranges, made: w.rangesMade, dropped: w.rangesDropped }).toEqual({
      ranges: 3,
      made: 2,
      dropped: 1,
    });
    expect(w.purgedEvents).toBe(42);
    expect(soakWindow(0, reading(0), reading(15), [], null)).toMatchObject({
      ranges: 0,
      rangesMade: 0,
      rangesDropped: 0,
    });
  });

  it('leaves backend CPU and claim time unknown where they could not be read', () => {
    const w = soakWindow(
      0,
      reading(0, { relayBackendCpuMs: null, claims: null }),
      reading(15, { handled: 10, relayBackendCpuMs: null, claims: null }),
      [],
      null,
    );
    expect(w.relayBackendCpuPerEventMs).toBeNull();
    expect(w.claimMeanMs).toBeNull();
    expect(w.claimCalls).toBeNull();
  });

  it('counts the seconds of the window under the held snapshot', () => {
    const hold = { startS: 20, endS: 50 };
    expect(soakWindow(0, reading(0), reading(15), [], hold).heldS).toBe(0);
    expect(soakWindow(1, reading(15), reading(30), [], hold).heldS).toBe(10);
    expect(soakWindow(2, reading(30), reading(45), [], hold).heldS).toBe(15);
    expect(soakWindow(3, reading(45), reading(60), [], hold).heldS).toBe(5);
  });
});

describe('judgeSoak', () => {
  const steady = (index: number, purged: number, size: number, p99: number, rate: number): SoakWindow =>
    window(index, { purgedEvents: purged, sizeBytes: size * MiB, p99Ms: p99, eventsPerS: rate });

  it('takes a dropped range as retention’s first cycle on the partitioned layout, where no row is deleted', () => {
    const verdict = judgeSoak([
      steady(0, 0, 5, 50, 400),
      { ...steady(1, 0, 10, 12, 400), rangesDropped: 1 },
      steady(2, 0, 20, 10, 400),
      { ...steady(3, 0, 21, 11, 396), rangesDropped: 1 },
    ]);
    if (!verdict.judged) throw new Error(verdict.reason);
    expect(verdict.first.index).toBe(2);
    expect(verdict.last.index).toBe(3);
  });

  it('compares the last window with the first after retention first purged', () => {
    const verdict = judgeSoak([
      steady(0, 0, 5, 50, 400),
      steady(1, 300, 10, 12, 400),
      steady(2, 1200, 20, 10, 400),
      steady(3, 1200, 21, 11, 396),
    ]);
    if (!verdict.judged) throw new Error(verdict.reason);
    expect(verdict.first.index).toBe(2);
    expect(verdict.last.index).toBe(3);
    expect(verdict.goals.map((g) => [g.label, g.ratio, g.met])).toEqual([
      ['outbox tables + indexes size', 1.05, true],
      ['commit → handler p99', 1.1, true],
      ['relay throughput', 0.99, true],
    ]);
  });

  it('misses each goal past its bound', () => {
    const verdict = judgeSoak([
      steady(0, 500, 5, 10, 400),
      steady(1, 0, 10, 10, 400),
      steady(2, 0, 11.1, 12.1, 359),
    ]);
    if (!verdict.judged) throw new Error(verdict.reason);
    expect(verdict.goals.map((g) => g.met)).toEqual([false, false, false]);
  });

  it('does not judge a run in which retention never purged, or purged too late to compare two windows', () => {
    const never = judgeSoak([steady(0, 0, 5, 10, 400), steady(1, 0, 6, 10, 400)]);
    expect(never).toMatchObject({ judged: false, reason: expect.stringContaining('never deleted') });
    const late = judgeSoak([steady(0, 0, 5, 10, 400), steady(1, 0, 6, 10, 400), steady(2, 10, 6, 10, 400)]);
    expect(late).toMatchObject({ judged: false, reason: expect.stringContaining('window 3 of 3') });
  });

  it('counts a goal whose reference is zero as missed', () => {
    const verdict = judgeSoak([steady(0, 10, 5, 10, 400), steady(1, 10, 5, 10, 0), steady(2, 10, 5, 10, 0)]);
    if (!verdict.judged) throw new Error(verdict.reason);
    expect(verdict.goals[2]).toMatchObject({ label: 'relay throughput', met: false });
  });
});

describe('holdEffect', () => {
  it('sets the median of the windows before the hold but the first against the end of the hold, the held window with the slowest claim and the first one after', () => {
    const windows = [
      window(0, { heldS: 0, claimMeanMs: 0.5, p99Ms: 90 }),
      window(1, { heldS: 0, claimMeanMs: 0.12, p99Ms: 10 }),
      window(2, { heldS: 0, claimMeanMs: 0.1, p99Ms: 30 }),
      window(3, { heldS: 0, claimMeanMs: 0.14, p99Ms: 20 }),
      window(4, { heldS: 10, claimMeanMs: 3 }),
      window(5, { heldS: 15, claimMeanMs: 9 }),
      window(6, { heldS: 5, claimMeanMs: 4 }),
      window(7, { heldS: 0, claimMeanMs: 0.2 }),
    ];
    const effect = holdEffect(windows);
    expect(effect?.beforeWindows.map((w) => w.index)).toEqual([1, 2, 3]);
    expect(effect?.before.claimMeanMs).toBe(0.12);
    expect(effect?.before.p99Ms).toBe(20);
    expect(effect?.end.index).toBe(6);
    expect(effect?.worst.index).toBe(5);
    expect(effect?.after?.index).toBe(7);
  });

  it('takes the one window there is before the hold, and a window read a few ms after the hold began on its boundary as before it', () => {
    const windows = [
      window(0, { heldS: 0.004, claimMeanMs: 0.1 }),
      window(1, { heldS: 60, claimMeanMs: 3 }),
      window(2, { heldS: 0.01, claimMeanMs: 0.2 }),
    ];
    const effect = holdEffect(windows);
    expect(effect?.beforeWindows.map((w) => w.index)).toEqual([0]);
    expect(effect?.before.claimMeanMs).toBe(0.1);
    expect(effect?.end.index).toBe(1);
    expect(effect?.worst.index).toBe(1);
    expect(effect?.after?.index).toBe(2);
  });

  it('has nothing to say without a hold, or with one from the first window (no window before it)', () => {
    expect(holdEffect([window(0, {}), window(1, {})])).toBeNull();
    expect(holdEffect([window(0, { heldS: 5 }), window(1, {})])).toBeNull();
  });
});
