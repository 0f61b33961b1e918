import { BrokerLink, BrokerUnavailableError } from './broker-link';

describe('BrokerLink', () => {
  let now = 0;
  const clock = (): number => now;
  const link = (open: (lost: () => void) => Promise<string>) =>
    new BrokerLink('broker:x', open, async () => undefined, { baseMs: 100, capMs: 400 }, clock);

  it('shares one connection attempt between concurrent callers and keeps the connection', async () => {
    let opened = 0;
    const l = link(async () => `c${++opened}`);
    expect(await Promise.all([l.get(), l.get()])).toEqual(['c1', 'c1']);
    expect(await l.get()).toBe('c1');
    expect(opened).toBe(1);
  });

  it('waits longer after each failed attempt, up to the cap, and refuses at once meanwhile', async () => {
    let attempts = 0;
    const l = link(async () => {
      attempts++;
      throw new Error('ECONNREFUSED');
    });
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const error = (await l.get().catch((e: unknown) => e)) as BrokerUnavailableError;
      expect(error).toBeInstanceOf(BrokerUnavailableError);
      expect(error.message).toContain('ECONNREFUSED');
      waits.push(error.retryAfterMs);
      // before the wait is over: no attempt, the remaining time
      now += error.retryAfterMs - 10;
      await expect(l.get()).rejects.toMatchObject({ retryAfterMs: 10 });
      now += 10;
    }
    expect(waits).toEqual([100, 200, 400, 400]);
    expect(attempts).toBe(4);
  });

  it('opens a new connection after the current one was lost, and none after close()', async () => {
    let opened = 0;
    const losers: (() => void)[] = [];
    const l = link(async (lost) => {
      losers.push(lost);
      return `c${++opened}`;
    });
    expect(await l.get()).toBe('c1');
    losers[0]!();
    expect(await l.get()).toBe('c2');
    // a late signal from the first connection does not drop the second
    losers[0]!();
    expect(await l.get()).toBe('c2');
    await l.close();
    await l.close();
    await expect(l.get()).rejects.toBeInstanceOf(BrokerUnavailableError);
  });
});
