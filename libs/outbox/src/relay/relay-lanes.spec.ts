import { LATE_AFTER_OWN_PER_LANE, LateVisits, laneCount, laneOrder, runLanes } from './relay-lanes';

describe('laneCount', () => {
  it("takes the option's number as it is, without asking the pool", () => {
    expect(laneCount(3, () => 1)).toBe(3);
    expect(
      laneCount(1, () => {
        throw new Error('asked the pool');
      }),
    ).toBe(1);
  });

  it("'auto': two from a pool of 8, one below", () => {
    expect(laneCount('auto', () => 10)).toBe(2);
    expect(laneCount('auto', () => 8)).toBe(2);
    expect(laneCount('auto', () => 7)).toBe(1);
  });
});

describe('laneOrder', () => {
  const lane = (name: string, backlogged: boolean): { name: string; backlogged: boolean } => ({
    name,
    backlogged,
  });
  const names = (lanes: readonly { name: string }[]): string[] => lanes.map((l) => l.name);
  const [one, two, three] = [lane('1', false), lane('2', true), lane('3', false)];

  it("gives a backlogged tenant's visit the lane whose last visit was a backlogged one, the others the other lanes", () => {
    // a backlogged tenant alone: its lane first, the others left for late visits
    expect(names(laneOrder([one, two, three], [{ backlog: true }]))).toEqual(['2', '1', '3']);
    // a tenant without a backlog first, then the backlogged one: each to its kind of lane
    expect(names(laneOrder([one, two], [{}, { backlog: true }]))).toEqual(['1', '2']);
    expect(names(laneOrder([two, one], [{ backlog: false }, { backlog: true }]))).toEqual(['1', '2']);
  });

  it('takes a lane of the other kind when none of the kind is left', () => {
    expect(names(laneOrder([one, three], [{ backlog: true }]))).toEqual(['1', '3']);
    expect(names(laneOrder([two], [{}, { backlog: true }]))).toEqual(['2']);
  });
});

/** A promise and its resolve, for visits that end when the test says. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

/** A turn of the event loop. */
function turn(): Promise<unknown> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * A round on two lanes with one own visit, 'slow', and late visits of the tenants `wake` names (then a turn); each
 * visit (`${name}@${lane}` in `started`) lasts until `end(name)` resolves.
 */
function roundWithSlowVisit(end: (visit: string) => Promise<void> | undefined): {
  started: string[];
  woken: string[];
  run: Promise<void>;
  wake: (visit: string) => Promise<void>;
} {
  const started: string[] = [];
  const woken: string[] = [];
  const late = new LateVisits(() => woken.shift());
  const run = runLanes(
    [1, 2],
    ['slow'],
    async (lane, v) => {
      started.push(`${v}@${lane}`);
      await end(v);
    },
    late,
  );
  const wake = async (visit: string): Promise<void> => {
    woken.push(visit);
    late.nudge();
    await turn();
  };
  return { started, woken, run, wake };
}

describe('runLanes', () => {
  it('runs as many visits at once as there are lanes, each lane taking the next when it is free', async () => {
    const ends = new Map(['a', 'b', 'c'].map((v) => [v, deferred()]));
    const started: string[] = [];
    const run = runLanes([1, 2], ['a', 'b', 'c'], async (lane, v) => {
      started.push(`${v}@${lane}`);
      await ends.get(v)!.promise;
    });
    await Promise.resolve();
    expect(started).toEqual(['a@1', 'b@2']);
    ends.get('b')!.resolve();
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a@1', 'b@2', 'c@2']);
    ends.get('a')!.resolve();
    ends.get('c')!.resolve();
    await expect(run).resolves.toBeUndefined();
  });

  it('after a failure starts no visit, and throws it once every lane has stopped', async () => {
    const slow = deferred();
    const started: string[] = [];
    let settled = false;
    const run = runLanes([1, 2], ['fails', 'slow', 'never'], async (_lane, v) => {
      started.push(v);
      if (v === 'fails') throw new Error('visit failed');
      if (v === 'slow') await slow.promise;
    }).finally(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    slow.resolve();
    await expect(run).rejects.toThrow('visit failed');
    expect(started).toEqual(['fails', 'slow']);
  });

  it('gives a lane with nothing left the late visits while another lane works, and stops once none works', async () => {
    const slow = deferred();
    const started: string[] = [];
    const woken: string[] = [];
    const late = new LateVisits(() => woken.shift());
    const run = runLanes(
      [1, 2],
      ['slow', 'quick'],
      async (lane, v) => {
        started.push(`${v}@${lane}`);
        if (v === 'slow') await slow.promise;
      },
      late,
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['slow@1', 'quick@2']);
    woken.push('late');
    late.nudge();
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['slow@1', 'quick@2', 'late@2']);
    slow.resolve();
    await expect(run).resolves.toBeUndefined();
    // once no lane works, a late visit waits for the next round
    woken.push('next round');
    late.nudge();
    expect(started).toHaveLength(3);
  });

  it('ends once its own visits are done, while tenants keep being woken: late visits never hold the round', async () => {
    const slow = deferred();
    let woken = 0;
    const started: string[] = [];
    // a steady stream of wake-ups (bounded here so that the test ends either way)
    const late = new LateVisits(() => (woken < 100 ? `late${++woken}` : undefined));
    const run = runLanes(
      [1, 2],
      ['slow'],
      async (_lane, v) => {
        started.push(v);
        await (v === 'slow' ? slow.promise : new Promise((resolve) => setImmediate(resolve)));
      },
      late,
    );
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    const whileSlow = started.length;
    expect(whileSlow).toBeGreaterThan(2);
    slow.resolve();
    await run;
    // the next round (its backlogged tenant, the scan for due tenants) waits for LATE_AFTER_OWN_PER_LANE more late
    // visits per lane at most
    expect(started.length - whileSlow).toBeLessThanOrEqual(LATE_AFTER_OWN_PER_LANE * 2);
  });

  it('once its own visits are done, gives a tenant woken while the other lanes work to the first lane free', async () => {
    const ends = new Map(['slow', 'late1', 'late2'].map((v) => [v, deferred()]));
    const { started, run, wake } = roundWithSlowVisit((v) => ends.get(v)?.promise);
    await turn();
    await wake('late1');
    // both lanes work: the next one woken waits
    await wake('late2');
    expect(started).toEqual(['slow@1', 'late1@2']);
    ends.get('slow')!.resolve();
    await turn();
    // the round's own visit done, its lane takes the one woken while 'late1' still runs
    expect(started).toEqual(['slow@1', 'late1@2', 'late2@1']);
    ends.get('late1')!.resolve();
    ends.get('late2')!.resolve();
    await expect(run).resolves.toBeUndefined();
  });

  it('once its own visits are done, lets a free lane take late visits beside one begun before they ended, LATE_AFTER_OWN_PER_LANE per lane', async () => {
    const afterOwn = LATE_AFTER_OWN_PER_LANE * 2;
    const ends = new Map<string, ReturnType<typeof deferred>>();
    const { started, woken, run, wake } = roundWithSlowVisit((v) => {
      const end = deferred();
      ends.set(v, end);
      return end.promise;
    });
    await turn();
    // 'first' begins while the round's own visit runs, and is still running once it ends
    await wake('first');
    ends.get('slow')!.resolve();
    await turn();
    // one woken at a time, each taken at once by the lane the own visit left, while 'first' runs (before, lane 1
    // took one and stopped: the second waited for 'first' to end, then for the next round)
    const taken = ['slow@1', 'first@2'];
    for (let i = 1; i <= afterOwn; i++) {
      await wake(`late${i}`);
      taken.push(`late${i}@1`);
      expect(started).toEqual(taken);
      ends.get(`late${i}`)!.resolve();
      await turn();
    }
    // that many after the round's own: the next one woken waits for the next round
    await wake('next round');
    expect(started).toEqual(taken);
    ends.get('first')!.resolve();
    await expect(run).resolves.toBeUndefined();
    expect(started).toEqual(taken);
    expect(woken).toEqual(['next round']);
  });

  it('with late visits, runs a single visit on the lanes too (another lane takes who is woken)', async () => {
    const late = new LateVisits<string>(() => undefined);
    const started: string[] = [];
    await runLanes([1, 2], ['only'], async (lane, v) => void started.push(`${v}@${lane}`), late);
    expect(started).toEqual(['only@1']);
  });
});
