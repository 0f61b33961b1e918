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
 * within the gap share one send, when the gap ends (plus `gapMs` of grace while inserts carry wake-ups, see
 * below). So below one commit per gap every commit wakes the relays at once, and above it the wake-ups stay at one
 * per gap at most, whatever the commit rate.
 *
 * A wake-up may also ride in the app's insert (ADR 1004, addendum of 2026-12-06): once the gap since the last
 * wake-up has passed, the next insert `mayCarry` a NOTIFY of its own, which PostgreSQL delivers when that
 * transaction commits, and its commit (`carried`) counts as a send. The grace after the gap gives that transaction
 * time to commit before a pending send goes out on a connection of its own: under sustained load the wake-ups
 * then ride in inserts, no round trip of their own. Only one insert per gap carries one, so the commits that take
 * PostgreSQL's notification lock stay one per gap (ADR 0606).
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
  /** When an insert last took a wake-up to carry (its transaction may not have committed yet). */
  private lastCarrierAt = Number.NEGATIVE_INFINITY;
  /** The last wake-up was carried: a pending send waits the grace for the next carrier. */
  private carrying = false;
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

  /**
   * Asks for a send on behalf of a commit whose wake-up no insert carried: now after a quiet spell, else at the end
   * of the gap and its grace (one send however many requests came meanwhile). `refused`: the commit's insert asked
   * to carry and was refused (within the gap, as of its insert): it waits for the end of the gap and its grace
   * even when the gap has ended since (its commit took that long), so that the next insert may carry it.
   */
  request(refused = false): void {
    const now = this.clock.now();
    this.noteRequest(now);
    if (this.timer !== null) return;
    if (refused ? now >= this.dueAt() : now >= this.lastWakeUpAt() + this.gap) this.sendNow();
    else this.sendAfter(this.dueAt() - now);
  }

  /**
   * Whether an insert about to be sent may carry a wake-up: yes once a gap has passed since the last send and the
   * last carrier (never with a gap of 0: a NOTIFY in every transaction would make their commits take the
   * notification lock one after another). A yes counts as this gap's carrier.
   */
  mayCarry(): boolean {
    if (this.gapMs === 0) return false;
    const now = this.clock.now();
    if (now < this.lastWakeUpAt() + this.gap) return false;
    this.lastCarrierAt = now;
    return true;
  }

  /**
   * A transaction whose insert carried a wake-up committed: a send now. `owed`: whether commits it did not cover
   * still wait for one (then due a gap and its grace from now); if none do, a pending send is dropped.
   */
  carried(owed: boolean): void {
    const now = this.clock.now();
    this.noteRequest(now);
    this.lastSentAt = now;
    this.carrying = true;
    this.stop();
    if (owed) this.sendAfter(this.dueAt() - now);
  }

  /** Drops a pending send (at shutdown: the relays' polls stand in for it). */
  stop(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * The last send, or the last carrier if later: a commit after a carrier's insert is not covered by its wake-up
   * (it may commit before the carrier), but waits for the next one as it would after a send.
   */
  private lastWakeUpAt(): number {
    return Math.max(this.lastSentAt, this.lastCarrierAt);
  }

  /**
   * When a pending send goes out: a gap after the last wake-up, and, when that one was carried, the grace in which
   * the next insert may carry this one (a process whose inserts carry none, keyed ones only, waits no grace).
   */
  private dueAt(): number {
    return this.lastWakeUpAt() + this.gap + (this.carrying ? this.grace() : 0);
  }

  /**
   * Time for the next insert to come and commit once the gap has ended: `gapMs` and the mean interval between
   * requests (the commit after the gap may come up to an interval late), the interval counted up to a quiet one.
   */
  private grace(): number {
    return this.gapMs + Math.min(this.meanIntervalMs, QUIET_INTERVALS * this.gapMs);
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
    this.carrying = false;
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
