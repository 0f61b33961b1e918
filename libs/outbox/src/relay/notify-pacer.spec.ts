import { NotifyPacer, type PacerClock } from './notify-pacer';

/** A clock that moves only when told, with timers that fire as it passes them. */
class FakeClock implements PacerClock {
  private at = 1000;
  private timers: { due: number; callback: () => void }[] = [];

  now(): number {
    return this.at;
  }
  setTimeout(callback: () => void, ms: number): unknown {
    const timer = { due: this.at + ms, callback };
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
