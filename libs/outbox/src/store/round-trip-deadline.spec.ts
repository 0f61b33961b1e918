import { createHook } from 'node:async_hooks';
import type { QueryRunner } from 'typeorm';
import { OutboxStallError } from '../errors/outbox.error';
import { RoundTripDeadline } from './round-trip-deadline';
import { bytesPer } from '../../../../test/support/allocated-bytes';

/** A runner holding a connection whose socket records being destroyed, in a pool with one idle connection. */
function fakeRunner(): { runner: QueryRunner; destroyed: string[] } {
  const destroyed: string[] = [];
  const client = (name: string) => ({
    connection: { stream: { destroy: () => destroyed.push(name), setKeepAlive: () => undefined } },
  });
  const runner = {
    databaseConnection: client('held'),
    isReleased: false,
    connection: { driver: { master: { _clients: [], _idle: [{ client: client('idle') }] } } },
  } as unknown as QueryRunner;
  return { runner, destroyed };
}

const never = (): Promise<never> => new Promise<never>(() => undefined);

describe('RoundTripDeadline', () => {
  it('returns what an answered round trip returns, and reports no stall', async () => {
    const deadline = new RoundTripDeadline(1000);
    const { runner, destroyed } = fakeRunner();
    await expect(deadline.within(runner, 'claim', 't', async () => 42)).resolves.toBe(42);
    expect(deadline.stall).toBeNull();
    expect(destroyed).toEqual([]);
  });

  it('gives up a round trip with no reply: closes its connection and the idle ones, and names it', async () => {
    const deadline = new RoundTripDeadline(20);
    const { runner, destroyed } = fakeRunner();
    const error = await deadline.within(runner, 'claim', 'tenant-a', never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxStallError);
    expect((error as Error).message).toContain('claim for tenant tenant-a within 20 ms');
    expect(destroyed).toEqual(['held', 'idle']);
    expect(deadline.stalled).toBe(true);
    expect(deadline.stall).toMatchObject({
      roundTrip: 'claim',
      tenantId: 'tenant-a',
      waitedMs: 20,
      recoveredAt: null,
    });
  });

  it('keeps the first stall of round trips that give up together, and ends it once a later one is answered', async () => {
    const deadline = new RoundTripDeadline(20);
    const inFlight = [
      deadline.within(fakeRunner().runner, 'batch', 'a', never).catch(() => undefined),
      deadline.within(fakeRunner().runner, 'dueTenantScan', null, never).catch(() => undefined),
    ];
    await Promise.all(inFlight);
    expect(deadline.stall).toMatchObject({ roundTrip: 'batch' });
    await deadline.within(fakeRunner().runner, 'claim', 'a', async () => undefined);
    expect(deadline.stalled).toBe(false);
    expect(deadline.stall).toMatchObject({ roundTrip: 'batch', recoveredAt: expect.any(String) });
  });

  it("sets the pool's query_timeout aside while a round trip runs (the deadline bounds it), then gives it back", async () => {
    const parameters = { query_timeout: 300 as number | false };
    const { runner } = fakeRunner();
    Object.assign((runner as unknown as { databaseConnection: object }).databaseConnection, {
      connectionParameters: parameters,
    });
    const during = await new RoundTripDeadline(1000).within(
      runner,
      'claim',
      't',
      async () => parameters.query_timeout,
    );
    expect(during).toBe(false);
    expect(parameters.query_timeout).toBe(300);
    // off: the pool's query_timeout is the only client-side bound left, and stays
    const off = await new RoundTripDeadline(0).within(
      runner,
      'claim',
      't',
      async () => parameters.query_timeout,
    );
    expect(off).toBe(300);
  });

  it('is off at 0: waits as long as the round trip takes', async () => {
    const deadline = new RoundTripDeadline(0);
    const { runner } = fakeRunner();
    const slow = new Promise<string>((resolve) => setTimeout(() => resolve('late'), 50));
    await expect(deadline.within(runner, 'claim', null, () => slow)).resolves.toBe('late');
    expect(deadline.stall).toBeNull();
  });

  it('arms one timer for round trips one after another, not one per round trip', async () => {
    const deadline = new RoundTripDeadline(60_000);
    const { runner } = fakeRunner();
    let timers = 0;
    const hook = createHook({
      init: (_id, type) => {
        if (type === 'Timeout') timers++;
      },
    }).enable();
    try {
      for (let i = 0; i < 50; i++) await deadline.within(runner, 'claim', 't', async () => i);
    } finally {
      hook.disable();
    }
    // the first round trip's timer serves the 49 after it (a timer per round trip before: 50)
    expect(timers).toBe(1);
  });

  it('gives up each round trip at its own deadline, when earlier ones were answered or gave up', async () => {
    const deadline = new RoundTripDeadline(60);
    const began = performance.now();
    // answered at once: the timer stays armed for its deadline
    await deadline.within(fakeRunner().runner, 'claim', 'a', async () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 30));
    const late = performance.now();
    const first = deadline.within(fakeRunner().runner, 'batch', 'a', never).catch(() => performance.now());
    await new Promise((resolve) => setTimeout(resolve, 20));
    const later = performance.now();
    const second = deadline.within(fakeRunner().runner, 'batch', 'b', never).catch(() => performance.now());
    const [firstGaveUp, secondGaveUp] = await Promise.all([first, second]);
    // never before its own deadline (the timer fired first at the answered round trip's, 60 ms after `began`)
    expect(firstGaveUp - late).toBeGreaterThanOrEqual(59);
    expect(secondGaveUp - later).toBeGreaterThanOrEqual(59);
    expect(secondGaveUp).toBeGreaterThan(began + 60);
    expect(deadline.stall).toMatchObject({ roundTrip: 'batch', tenantId: 'a' });
  });

  it('gives up the round trips before and after one that was answered meanwhile', async () => {
    const deadline = new RoundTripDeadline(40);
    const gaveUp = (p: Promise<unknown>): Promise<unknown> =>
      p.then(
        () => 'answered',
        (e: unknown) => e,
      );
    let answer: (value: string) => void = () => undefined;
    const a = gaveUp(deadline.within(fakeRunner().runner, 'claim', 'a', never));
    const b = gaveUp(
      deadline.within(fakeRunner().runner, 'claim', 'b', () => new Promise<string>((r) => (answer = r))),
    );
    const c = gaveUp(deadline.within(fakeRunner().runner, 'claim', 'c', never));
    answer('b');
    const results = await Promise.all([a, b, c]);
    expect(results[0]).toBeInstanceOf(OutboxStallError);
    expect(results[1]).toBe('answered');
    expect(results[2]).toBeInstanceOf(OutboxStallError);
  });

  it('rejects a round trip whose work throws at once with its error, and leaves nothing waiting', async () => {
    const deadline = new RoundTripDeadline(30);
    const failing = (): Promise<never> => {
      throw new Error('refused');
    };
    await expect(deadline.within(fakeRunner().runner, 'claim', 'a', failing)).rejects.toThrow('refused');
    // the next one still gives up at its deadline, and the stall is its own
    await expect(deadline.within(fakeRunner().runner, 'batch', 'b', never)).rejects.toBeInstanceOf(
      OutboxStallError,
    );
    expect(deadline.stall).toMatchObject({ roundTrip: 'batch', tenantId: 'b' });
  });

  it("destroys a client of the relay's own that gives no reply (withinClient)", async () => {
    const deadline = new RoundTripDeadline(20);
    const destroyed: unknown[] = [];
    const client = {
      connection: {
        stream: { destroy: (error?: Error) => destroyed.push(error), setKeepAlive: () => undefined },
      },
    };
    const error = await deadline.withinClient(client, 'listen', never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxStallError);
    expect(destroyed).toEqual([error]);
    expect(deadline.stall).toMatchObject({ roundTrip: 'listen', tenantId: null });
  });

  it('allocates one object per round trip answered at once, not seven closures and three contexts', async () => {
    const deadline = new RoundTripDeadline(61_000);
    const { runner } = fakeRunner();
    const answered = async (): Promise<number> => 1;
    // the same promises without the deadline: one made around the work's, which it follows
    const bare = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await new Promise((resolve) => void answered().then(resolve));
    };
    const bounded = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await deadline.within(runner, 'claim', null, answered);
    };
    await bare(20_000);
    await bounded(20_000);
    // what the deadline adds to a round trip beside those promises
    const added = (await bytesPer(bounded, 100_000)) - (await bytesPer(bare, 100_000));
    // 264 bytes (its entry, the two callbacks of the work's answer and their context); 640 with the seven closures
    // and three contexts each round trip made before
    expect(added).toBeLessThan(450);
  });
});
