import type { Clock } from '../model/clock';
import type { OutboxStorePort } from '../store/outbox-store.port';

/** Most delayed events one promotion makes pending; more due ones are promoted by the next, at once. */
export const PROMOTE_MAX = 1000;
/** How soon to look again when the next event is already due but another relay's promotion holds it. */
const HELD_RETRY_MS = 5;
/** setTimeout's longest delay; a later event is looked at again then (or at a poll, which also promotes). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * A relay that hears wake-ups promotes at a poll only when its last promotion is this many polls old: delayed
 * events enqueued by an instance that does not notify (its own relay promotes them) are still found if that
 * relay stops before they are due.
 */
export const RECHECK_POLLS = 10;

/** What a promoter decides by besides the store. */
export interface PromoterSettings {
  /** `relay.scheduledCoalesceMs`: its timer fires at most once per this many ms (0: at every due instant). */
  coalesceMs: number;
  /** `relay.pollIntervalMs`. */
  pollIntervalMs: number;
  /** Whether wake-ups from other instances reach this relay now (it listens, and its listener is connected). */
  hears: () => boolean;
  /** What the windows are measured by: the process's monotonic clock unless a test gives its own. */
  clock?: Clock;
}

/** Monotonic: a wall clock set back would otherwise hold the timer back by as much. */
const MONOTONIC: Clock = { now: () => performance.now() };

/**
 * How delayed events reach delivery on this relay instance: when asked (by a wake-up that names no tenant — an
 * enqueue of a delayed event sends one —, by its own timer, by a poll when it cannot rely on those), the next
 * round first promotes the due ones (`outbox_promote_scheduled`: they become `pending`, in their tenants' order
 * from then on) and hints their tenants; the answer also says when the next one is due, by the database's clock,
 * and one timer is set for that instant — or, when its timer fired less than `coalesceMs` ago, for the end of
 * that window, so that events due close together are promoted (and claimed) together. Not asked, it sends
 * nothing: a round of a relay that nobody sends delayed events to costs what it did. See
 * docs/adr/1102-delayed-events-are-promoted.md and docs/adr/1204-delayed-promotions-are-coalesced.md.
 */
export class ScheduledPromoter {
  private requested = true;
  /** The last promotion said some delayed event is still scheduled. */
  private knowsScheduled = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** When the timer last fired (`clock` ms), or -Infinity. */
  private firedAt = Number.NEGATIVE_INFINITY;
  /** When the last promotion answered (`clock` ms), or -Infinity. */
  private answeredAt = Number.NEGATIVE_INFINITY;

  private readonly clock: Clock;

  /** @param due called when the timer fires: the relay wakes for a round (which promotes). */
  constructor(
    private readonly store: OutboxStorePort,
    private readonly due: () => void,
    private readonly settings: PromoterSettings,
  ) {
    this.clock = settings.clock ?? MONOTONIC;
  }

  /** The next round promotes due delayed events first. */
  request(): void {
    this.requested = true;
  }

  /**
   * The next round promotes when the last promotion said some delayed event is still scheduled: for rounds driven
   * by hand (`runOnce`, `drain`), which no timer wakes. A relay never sent delayed events is not asked.
   */
  requestIfScheduled(): void {
    if (this.knowsScheduled) this.requested = true;
  }

  /**
   * A poll: the next round promotes when wake-ups from other instances may not reach this relay (it does not
   * listen, or its listener is down) or its last promotion is {@link RECHECK_POLLS} polls old. Otherwise its
   * timer covers what it knows is scheduled and a NOTIFY naming no tenant what other instances enqueue.
   */
  requestAtPoll(): void {
    const { hears, pollIntervalMs } = this.settings;
    if (!hears() || this.clock.now() - this.answeredAt >= RECHECK_POLLS * pollIntervalMs)
      this.requested = true;
  }

  /** True when the next round is to promote (asked since the last time, not stopped). */
  get isRequested(): boolean {
    return this.requested && !this.stopped;
  }

  /**
   * When asked since the last time: promotes due delayed events and sets the timer for the next one. Returns the
   * tenants whose events became pending (none when it did not look).
   */
  async promoteIfRequested(): Promise<string[]> {
    if (!this.requested || this.stopped) return [];
    this.requested = false;
    try {
      const { tenantIds, promoted, nextDueInMs } = await this.store.promoteScheduled({ limit: PROMOTE_MAX });
      this.answeredAt = this.clock.now();
      if (promoted >= PROMOTE_MAX) this.arm(0);
      else if (nextDueInMs === null) this.arm(null);
      // already due, yet not promoted here: another relay's promotion holds it (or it fell due meanwhile)
      else if (nextDueInMs <= 0) this.arm(HELD_RETRY_MS);
      // the timer fires at most once per window: the events due meanwhile wait for its end, together
      else this.arm(Math.max(nextDueInMs, this.firedAt + this.settings.coalesceMs - this.answeredAt));
      return tenantIds;
    } catch (error) {
      this.requested = true;
      throw error;
    }
  }

  /** Clears the timer; nothing is promoted any more. Safe to call twice. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** One timer, for the next due event (`inMs` from now), replacing any earlier one; null: none. */
  private arm(inMs: number | null): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.knowsScheduled = inMs !== null;
    if (inMs === null || this.stopped) return;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.firedAt = this.clock.now();
        this.request();
        this.due();
      },
      Math.min(MAX_TIMER_MS, Math.ceil(inMs)),
    );
    // the relay's interval keeps the process alive while it runs; this timer alone need not
    this.timer.unref();
  }
}
