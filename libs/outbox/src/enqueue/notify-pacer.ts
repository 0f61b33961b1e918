/** The clock and timers a pacer runs on (the process's own, or a test's). */
export interface PacerClock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const PROCESS_CLOCK: PacerClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * The wake-up's policy (ADR 0606), with one switch, `RelayPolicy.wakeUpGapMs` (`gapMs`; 0: one NOTIFY per commit):
 * spaces a process's wake-ups at least `gapMs` apart. A request after a quiet spell sends at once — in the
 * caller's turn, not on a timer, which Node would hold back at least a millisecond — and the requests that follow
 * within the gap share one send, when the gap ends. So below one commit per gap every commit wakes the relays at
 * once, and above it the wake-ups stay at one per gap at most, whatever the commit rate.
 *
 * Under sustained load the gap widens, up to `WIDEST` times `gapMs`: a NOTIFY is a round trip on a connection of
 * its own, and beside a busy one it costs the process several times its own cost. The gap is
 * `2 × gapMs² / mean interval between requests`, within [`gapMs`, `WIDEST × gapMs`]: it stays `gapMs` while
 * requests come one per `2 × gapMs` or slower (with the default 2 ms, up to 250 commits/s: each still wakes the
 * relays at once), and at higher rates a relay in another process — busy at such rates anyway — is woken at
 * least every `WIDEST × gapMs`. The mean is weighted towards recent requests and starts quiet, so a short burst
 * keeps the narrow gap. Why, and what was measured: docs/adr/0606-no-notify-in-the-app-transaction-and-the-pacer.md.
 */
export class NotifyPacer {
  private lastSentAt = Number.NEGATIVE_INFINITY;
  private lastRequestAt: number | null = null;
  /** Mean time between requests, in ms, weighted towards recent ones (see `widenedGap`). */
  private meanIntervalMs: number;
  /** The gap in force, as of the last request. */
  private gap: number;
  private timer: unknown = null;

  constructor(
    private readonly gapMs: number,
    private readonly send: () => void,
    private readonly clock: PacerClock = PROCESS_CLOCK,
  ) {
    this.meanIntervalMs = QUIET_INTERVALS * gapMs;
    this.gap = gapMs;
  }

  /** Asks for a send on behalf of a commit: now after a quiet spell, else at the end of the gap (one send however many requests came meanwhile). */
  request(): void {
    const now = this.clock.now();
    this.noteRequest(now);
    if (this.timer !== null) return;
    const wait = this.dueAt() - now;
    if (wait <= 0) this.sendNow();
    else this.sendAfter(wait);
  }

  /** Drops a pending send (at shutdown: the relays' polls stand in for it). */
  stop(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  /** When a pending send goes out: a gap after the last send. */
  private dueAt(): number {
    return this.lastSentAt + this.gap;
  }

  /**
   * Sends once `wait` ms have passed, and not before: Node fires a timer by its event loop's clock, read at the
   * start of the loop's turn and in whole milliseconds, so a timer can fire up to a millisecond early — with a
   * 2 ms gap, half the gap (ADR 0606). Under sustained load (the gap widened), the timer is armed for the whole
   * milliseconds left and one more, so that it seldom fires early: armed for the exact time, it mostly did, and the
   * check below armed it again — a second wake-up of the event loop per send, which cost the enqueuing process more
   * CPU than the NOTIFY itself (ADR 1004); such a send goes out within about a millisecond after its gap. At the
   * narrow gap (bursts at low rates, where a wake-up's latency shows) the timer keeps the exact time.
   */
  private sendAfter(wait: number): void {
    const armed = this.gap > this.gapMs ? Math.ceil(wait) + 1 : wait;
    this.timer = this.clock.setTimeout(() => {
      const left = this.dueAt() - this.clock.now();
      if (left > 0) {
        this.sendAfter(left);
        return;
      }
      this.timer = null;
      this.sendNow();
    }, armed);
  }

  /** Updates the mean interval between requests, and the gap that follows from it. */
  private noteRequest(now: number): void {
    if (this.lastRequestAt !== null) {
      // a long pause counts as a quiet interval, not more: under renewed load the gap widens again soon
      const interval = Math.min(now - this.lastRequestAt, QUIET_INTERVALS * this.gapMs);
      this.meanIntervalMs += SMOOTHING * (interval - this.meanIntervalMs);
    }
    this.lastRequestAt = now;
    this.gap = widenedGap(this.gapMs, this.meanIntervalMs);
  }

  private sendNow(): void {
    this.lastSentAt = this.clock.now();
    this.send();
  }
}

/** Widest gap, as a multiple of `gapMs`. */
const WIDEST = 5;
/** Weight of the latest interval in the mean. */
const SMOOTHING = 0.2;
/** A quiet interval, as a multiple of `gapMs`: the mean starts there, and no interval counts for more. */
const QUIET_INTERVALS = 4;

/** `2 × gap² / mean`, within [gap, WIDEST × gap]: the narrow gap while requests come one per `2 × gap` or slower. */
export function widenedGap(gapMs: number, meanIntervalMs: number): number {
  if (gapMs === 0) return 0;
  const widened = meanIntervalMs > 0 ? (2 * gapMs * gapMs) / meanIntervalMs : Number.POSITIVE_INFINITY;
  return Math.min(WIDEST * gapMs, Math.max(gapMs, widened));
}
