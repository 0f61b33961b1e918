import { NotifyPacer, type PacerClock } from './notify-pacer';

/** A clock that moves only when told, with timers that fire as it passes them. */
class FakeClock implements PacerClock {
  private at = 1000;
  private timers: { due: number; callback: () => void }[] = [];

  /** @param early how much sooner than asked the timers fire (as Node's may, by up to a millisecond) */
  constructor(private readonly early = 0) {}

  now(): number {
    return this.at;
  }
  setTimeout(callback: () => void, ms: number): unknown {
    const timer = { due: this.at + ms - this.early, callback };
    this.timers.push(timer);
    return timer;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t !== handle);
  }
  advance(ms: number): void {
    this.at += ms;
    for (const timer of this.timers.filter((t) => t.due <= this.at)) {
      this.timers = this.timers.filter((t) => t !== timer);
      timer.callback();
    }
  }
  pending(): number {
    return this.timers.length;
  }
}

describe('NotifyPacer', () => {
  let clock: FakeClock;
  let sentAt: number[];
  const pacer = (gapMs: number) => new NotifyPacer(gapMs, () => sentAt.push(clock.now()), clock);

  beforeEach(() => {
    clock = new FakeClock();
    sentAt = [];
  });

  it('sends the first request at once, in the caller’s turn, without a timer', () => {
    pacer(5).request();
    expect(sentAt).toEqual([1000]);
    expect(clock.pending()).toBe(0);
  });

  it('sends each request at once while they come further apart than the gap', () => {
    const p = pacer(2);
    for (let i = 0; i < 3; i++) {
      p.request();
      clock.advance(4);
    }
    expect(sentAt).toEqual([1000, 1004, 1008]);
  });

  it('makes the requests within the gap share one send, at the end of the gap', () => {
    const p = pacer(5);
    p.request();
    clock.advance(1);
    p.request();
    clock.advance(1);
    p.request();
    expect(sentAt).toEqual([1000]);
    clock.advance(3);
    expect(sentAt).toEqual([1000, 1005]);
    // the gap runs from that send: a request 1 ms later waits 4 ms
    clock.advance(1);
    p.request();
    clock.advance(3);
    expect(sentAt).toEqual([1000, 1005]);
    clock.advance(1);
    expect(sentAt).toEqual([1000, 1005, 1010]);
  });

  it('never sends two closer than the gap, even when its timer fires early', () => {
    clock = new FakeClock(1);
    const p = pacer(2);
    for (let i = 0; i < 8; i++) {
      p.request();
      clock.advance(0.5);
    }
    clock.advance(4);
    expect(sentAt.length).toBeGreaterThan(1);
    const gaps = sentAt.slice(1).map((at, i) => at - sentAt[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(2);
  });

  it('with a gap of 0, sends every request at once', () => {
    const p = pacer(0);
    p.request();
    p.request();
    expect(sentAt).toEqual([1000, 1000]);
  });

  it('drops the pending send when stopped', () => {
    const p = pacer(5);
    p.request();
    p.request();
    p.stop();
    clock.advance(10);
    expect(sentAt).toEqual([1000]);
  });
});
