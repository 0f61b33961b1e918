import { NotifyPacer, widenedGap, type PacerClock } from './notify-pacer';

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
    // as Node's: at least 1 ms, less `early`
    const timer = { due: this.at + Math.max(ms, 1) - this.early, callback };
    this.timers.push(timer);
    return timer;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t !== handle);
  }
  /** Moves the clock `ms` on, firing each timer it passes at its due time (in due order). */
  advance(ms: number): void {
    const until = this.at + ms;
    for (;;) {
      const next = this.timers
        .filter((t) => t.due <= until)
        .reduce<{ due: number; callback: () => void } | null>((a, t) => (a && a.due <= t.due ? a : t), null);
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.at = Math.max(this.at, next.due);
      next.callback();
    }
    this.at = until;
  }
  pending(): number {
    return this.timers.length;
  }
}

describe('NotifyPacer', () => {
  let clock: FakeClock;
  let sentAt: number[];
  const pacer = (gapMs: number) => new NotifyPacer(gapMs, () => sentAt.push(clock.now()), clock);
  /** `count` requests, `everyMs` apart. */
  const requests = (p: NotifyPacer, count: number, everyMs: number) => {
    for (let i = 0; i < count; i++) {
      p.request();
      clock.advance(everyMs);
    }
  };
  const gapsBetweenSends = () => sentAt.slice(1).map((at, i) => at - sentAt[i]!);

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
    requests(pacer(2), 3, 4);
    expect(sentAt).toEqual([1000, 1004, 1008]);
  });

  it('sends each request at once at 250 per second with jitter (every 3 or 5 ms), at the default gap', () => {
    const p = pacer(2);
    for (let i = 0; i < 200; i++) {
      p.request();
      expect(sentAt).toHaveLength(i + 1);
      clock.advance(i % 2 === 0 ? 3 : 5);
    }
  });

  it('makes the requests within the gap share one send, at the end of the gap', () => {
    const p = pacer(5);
    p.request();
    clock.advance(1);
    p.request();
    clock.advance(1);
    p.request();
    expect(sentAt).toEqual([1000]);
    clock.advance(2);
    expect(sentAt).toEqual([1000]);
    clock.advance(1);
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
    clock = new FakeClock(0.9);
    const p = pacer(2);
    requests(p, 8, 0.5);
    clock.advance(4);
    expect(sentAt.length).toBeGreaterThan(1);
    expect(Math.min(...gapsBetweenSends())).toBeGreaterThanOrEqual(2);
  });

  it('with a gap of 0, sends every request at once', () => {
    const p = pacer(0);
    p.request();
    p.request();
    expect(sentAt).toEqual([1000, 1000]);
  });

  it('widens the gap under sustained load, up to five times, and only then', () => {
    // two requests per ms for 200 ms: a fixed 2 ms gap would send 100 times
    requests(pacer(2), 400, 0.5);
    const gaps = gapsBetweenSends();
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(2);
    // the widest gap: 10 ms, and the millisecond a widened gap's timer is armed for beyond it (ADR 1004)
    expect(gaps.slice(-5)).toEqual([11, 11, 11, 11, 11]);
    expect(sentAt.length).toBeLessThan(30);
  });

  it('under sustained load arms one timer per send, even when timers fire early', () => {
    clock = new FakeClock(0.9);
    let armed = 0;
    const setTimer = clock.setTimeout.bind(clock);
    clock.setTimeout = (callback, ms) => {
      armed++;
      return setTimer(callback, ms);
    };
    const p = pacer(2);
    requests(p, 100, 0.5); // the gap widens
    armed = 0;
    sentAt = [];
    requests(p, 300, 0.5);
    const late = gapsBetweenSends();
    // a timer armed for the exact time would fire early and be armed again: two per send
    expect(armed).toBeLessThanOrEqual(sentAt.length);
    expect(Math.min(...late)).toBeGreaterThanOrEqual(10);
    expect(Math.max(...late)).toBeLessThanOrEqual(11);
  });

  it('keeps the narrow gap for a short burst after a quiet spell', () => {
    const p = pacer(2);
    requests(p, 2, 0.5);
    p.request();
    clock.advance(10);
    expect(sentAt).toEqual([1000, 1002]);
  });

  it('narrows the gap again once requests slow down', () => {
    const p = pacer(2);
    requests(p, 400, 0.5);
    clock.advance(20);
    const before = sentAt.length;
    // one request per 4 ms (250 per second, at the default gap): each is sent at once again
    for (let i = 0; i < 5; i++) {
      p.request();
      expect(sentAt).toHaveLength(before + i + 1);
      clock.advance(4);
    }
  });

  it('computes the gap from the mean interval between requests', () => {
    expect(widenedGap(2, 8)).toBe(2);
    expect(widenedGap(2, 4)).toBe(2);
    expect(widenedGap(2, 2)).toBe(4);
    expect(widenedGap(2, 1)).toBe(8);
    expect(widenedGap(2, 0.5)).toBe(10);
    expect(widenedGap(2, 0)).toBe(10);
    expect(widenedGap(0, 0.5)).toBe(0);
  });

  describe('with inserts that carry wake-ups', () => {
    /**
     * One connection's commits, `everyMs` apart, each insert asking to carry the wake-up and committing `commitMs`
     * later; returns how many carried one (the pooled sends are in `sentAt`).
     */
    const commits = (p: NotifyPacer, count: number, everyMs: number, commitMs = 0.5) => {
      let carried = 0;
      for (let i = 0; i < count; i++) {
        const carries = p.mayCarry();
        clock.advance(commitMs);
        if (carries) {
          carried++;
          p.carried(false);
        } else p.request();
        clock.advance(everyMs - commitMs);
      }
      return carried;
    };

    it('lets the first insert after a quiet spell carry, and no other within the gap', () => {
      const p = pacer(5);
      expect(p.mayCarry()).toBe(true);
      expect(p.mayCarry()).toBe(false);
      clock.advance(1);
      p.carried(false);
      clock.advance(4);
      expect(p.mayCarry()).toBe(false);
      clock.advance(1);
      expect(p.mayCarry()).toBe(true);
      expect(sentAt).toEqual([]);
    });

    it('never lets an insert carry with a gap of 0', () => {
      expect(pacer(0).mayCarry()).toBe(false);
    });

    it('sends nothing on a connection of its own while each gap has a carrier, at 250 and at 1,000 commits/s', () => {
      const p = pacer(2);
      expect(commits(p, 1000, 4)).toBe(1000);
      expect(commits(p, 4000, 1)).toBeGreaterThan(300);
      expect(sentAt).toEqual([]);
      // the commits after the last carrier: one send, at the end of the gap and its grace
      const end = clock.now();
      clock.advance(50);
      expect(sentAt).toHaveLength(1);
      expect(sentAt[0]! - end).toBeLessThanOrEqual(12);
      expect(clock.pending()).toBe(0);
    });

    it('sends a commit the carrier did not cover at the end of the gap and its grace, if no insert carried it', () => {
      const p = pacer(5);
      expect(p.mayCarry()).toBe(true);
      p.carried(false); // at 1000
      clock.advance(1);
      p.request(); // within the gap
      clock.advance(25);
      expect(sentAt).toEqual([]);
      clock.advance(20);
      // the grace: the 5 ms gap and the mean interval between requests (from a quiet 20 ms, one of 1 ms: 16.2)
      expect(sentAt).toHaveLength(1);
      expect(sentAt[0]).toBeCloseTo(1000 + 5 + 5 + 16.2);
    });

    it('makes a commit whose insert was refused wait for the next carrier, even when its gap ended before the commit', () => {
      const p = pacer(2);
      expect(commits(p, 50, 4)).toBe(50); // at 250 per second every insert carries
      expect(p.mayCarry()).toBe(true);
      p.carried(false);
      clock.advance(1);
      expect(p.mayCarry()).toBe(false); // an insert within the gap: refused
      clock.advance(3); // its commit, after the gap
      p.request(true);
      expect(sentAt).toEqual([]);
      expect(p.mayCarry()).toBe(true); // the next insert carries it
      clock.advance(0.5);
      p.carried(false);
      clock.advance(20);
      expect(sentAt).toEqual([]);
    });

    it('waits for a carrier in flight: a commit after its insert is sent a gap after the carrier, not at once', () => {
      const p = pacer(5);
      expect(p.mayCarry()).toBe(true); // at 1000; its transaction commits later
      clock.advance(1);
      p.request(); // another connection's commit, not covered by the carrier
      expect(sentAt).toEqual([]);
      clock.advance(1);
      p.carried(true); // the carrier commits at 1002: the other commit is still owed
      clock.advance(50);
      // a gap and its grace after the carrier (the mean interval: 16.2 ms, as above)
      expect(sentAt).toHaveLength(1);
      expect(sentAt[0]).toBeCloseTo(1002 + 5 + 5 + 16.2);
    });

    it('sends after the gap without grace once the last wake-up went on a connection of its own', () => {
      const p = pacer(5);
      p.request();
      clock.advance(1);
      p.request();
      clock.advance(10);
      expect(sentAt).toEqual([1000, 1005]);
    });
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
