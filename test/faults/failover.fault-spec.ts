import {
  ANSWER_BOUND_MS,
  printFigures,
  PROBE_BOUND_MS,
  runFailover,
  type FailoverCase,
  type FailoverFigures,
} from './support/failover-scenario';

/** Commit → handler p99 once the app follows the new primary: wake-ups, not the poll interval (1 s). */
const P99_BOUND_MS = 250;

/** What every case must show, whatever the replication and the route. */
function expectSoundHistory(f: FailoverFigures): void {
  expect({ unanswered: f.unanswered, answeredWithinBound: f.maxAnswerMs <= ANSWER_BOUND_MS }).toEqual({
    unanswered: 0,
    answeredWithinBound: true,
  });
  expect({ unpaired: f.unpaired, lostInPart: f.lostInPart, dead: f.dead }).toEqual({
    unpaired: 0,
    lostInPart: 0,
    dead: 0,
  });
  expect(f.history).toMatchObject({ lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  // Delivered after the promotion without a restart of the worker.
  expect(f.resumeMs).not.toBeNull();
  expect(f.probeMs).not.toBeNull();
  expect(f.probeMs!).toBeLessThanOrEqual(PROBE_BOUND_MS);
  expect(f.apiResumeMs).not.toBeNull();
}

/**
 * A primary and a streaming standby (a cold copy of the primary's new cluster, embedded PostgreSQL's binaries), an
 * API process enqueueing ~100 business transactions a second and a worker process relaying them to a consumer
 * that writes through `context.manager`. The primary dies or hangs under load, the standby is promoted half a
 * second later, the load goes on for 5 s; then the history is checked on the new primary. Each case owns its pair
 * of throwaway clusters.
 */
describe('fault: failover to a promoted streaming standby', () => {
  async function run(c: FailoverCase): Promise<FailoverFigures> {
    const figures = await runFailover(c);
    printFigures(c, figures);
    return figures;
  }

  it('primary killed, asynchronous standby 500 ms behind: what is lost is lost whole, and the relay resumes by itself', async () => {
    const f = await run({
      name: '(a) kill + promote, asynchronous, 500 ms lag, via a re-pointed proxy',
      fault: 'kill',
      synchronous: false,
      replicationDelayMs: 500,
      route: 'proxy',
    });
    expectSoundHistory(f);
  });

  it('primary killed, synchronous standby: no acknowledged commit is lost', async () => {
    const f = await run({
      name: '(b) kill + promote, synchronous, via a re-pointed proxy',
      fault: 'kill',
      synchronous: true,
      route: 'proxy',
    });
    expectSoundHistory(f);
    expect(f.lostAcknowledged).toBe(0);
  });

  it('primary frozen (every process SIGSTOPped): the relay gives up on it and delivers from the new primary', async () => {
    const f = await run({
      name: '(c) freeze + promote, asynchronous, via a re-pointed proxy',
      fault: 'freeze',
      synchronous: false,
      route: 'proxy',
    });
    expectSoundHistory(f);
  });

  it('a Client class that picks the writable host: the pool and the LISTEN connection follow the promotion', async () => {
    const f = await run({
      name: '(d) kill + promote, synchronous, via a host-selecting Client class',
      fault: 'kill',
      synchronous: true,
      route: 'client-class',
    });
    expectSoundHistory(f);
    expect(f.lostAcknowledged).toBe(0);
    expect(f.listenOnNewPrimary).toBe(true);
    expect(f.p99Ms).not.toBeNull();
    expect(f.p99Ms!).toBeLessThan(P99_BOUND_MS);
  });
});
