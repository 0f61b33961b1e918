import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OUTBOX_RELAY_POLICY, type RelayPolicy } from '../options/relay-policy';
import { OUTBOX_CLOCK, systemClock, type Clock } from '../model/clock';
import { errorText } from '../errors/error-text';
import { OutboxStore } from '../store/outbox.store';
import * as q from '../store/sql';

/**
 * Keeps `outbox_event_leases` small while the relay is busy. Each in-process batch inserts a lease row per
 * event and its outcome deletes it. Until VACUUM runs, the dead rows stay in their pages and new rows go to new
 * pages (only VACUUM records the space freed), so the table grows by a page per hundred events, and every claim
 * and outcome reads those pages. Autovacuum comes by once per `autovacuum_naptime` (a minute by default): at
 * thousands of events per second that is tens of thousands of dead rows, and the claims slow down with the
 * drain's length (measured: docs/adr/0601-event-leases-in-an-unlogged-table.md).
 *
 * So the relay vacuums it after every `relay.vacuumLeasesEvery` leases it released, in the background, one
 * vacuum at a time per instance, when its role may (checked once; otherwise it says so once and leaves the
 * table to autovacuum). A failed vacuum is logged and tried again after as many leases.
 *
 * While something holds the vacuum horizon back (a long transaction, a replication slot), a vacuum can remove
 * none of the rows deleted since the previous one, and reads the whole table all the same. So each vacuum first
 * reads the horizon (`policy.horizonVacuums`): while it is where it stood before the previous vacuum, that
 * vacuum already removed all it allowed, and this one is skipped, but for one every `heldEveryMs` (ADR 0601's
 * addendum).
 */
@Injectable()
export class LeaseVacuum {
  private readonly logger = new Logger(LeaseVacuum.name);
  private readonly clock: Clock;
  private released = 0;
  private running: Promise<void> | null = null;
  /** Whether the role may vacuum the table: unknown until the first vacuum is due. */
  private allowed: boolean | undefined;
  /** The horizon read before the latest vacuum and when that vacuum began; null when nothing held it. */
  private latest: { horizon: string; at: number } | null = null;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    @Inject(OUTBOX_RELAY_POLICY) private readonly policy: Pick<RelayPolicy, 'horizonVacuums'>,
    @Optional() @Inject(OUTBOX_CLOCK) clock: Clock | null = null,
  ) {
    this.clock = clock ?? systemClock;
  }

  /**
   * Counts leases this instance released (their outcome committed); once enough have been, starts a vacuum
   * (or skips it, see above) and returns it (it never rejects). Null when none started.
   */
  noteReleased(leases: number): Promise<void> | null {
    const every = this.options.relay.vacuumLeasesEvery;
    if (every === 0 || this.allowed === false) return null;
    this.released += leases;
    if (this.released < every || this.running) return null;
    this.released = 0;
    this.running = this.vacuum().finally(() => (this.running = null));
    return this.running;
  }

  private async vacuum(): Promise<void> {
    try {
      if (this.allowed === undefined) {
        const [row] = await this.store.relayQuery<{ allowed: boolean }>(
          q.mayVacuumLeases(this.options.names),
          'leaseVacuum',
        );
        this.allowed = row?.allowed === true;
        if (!this.allowed) {
          this.logger.log(
            'this role may not VACUUM outbox_event_leases (it needs to own the table, or MAINTAIN from PostgreSQL 17): ' +
              'the table is left to autovacuum; lower its autovacuum thresholds if claims slow down during long drains',
          );
          return;
        }
      }
      const reading = await this.readHorizon();
      if (reading.skip) return;
      const { horizon } = reading;
      const at = this.clock.now();
      // under the relay's own bounds, not the role's or the database's statement_timeout
      await this.store.relayCommand(q.vacuumLeases(this.options.names), 'leaseVacuum');
      this.latest = horizon === null ? null : { horizon, at };
    } catch (error) {
      this.logger.warn(`could not vacuum outbox_event_leases: ${errorText(error)}`);
    }
  }

  /**
   * The horizon now (null: nothing holds it, or it is not read), and whether to skip the vacuum: while it is where
   * it was before the previous vacuum, but for one every `heldEveryMs`.
   */
  private async readHorizon(): Promise<{ horizon: string | null; skip: boolean }> {
    const held = this.policy.horizonVacuums;
    if (!held) return { horizon: null, skip: false };
    const [row] = await this.store.relayQuery<q.LeaseVacuumHorizonRow>(q.leaseVacuumHorizon(), 'leaseVacuum');
    const horizon = row?.horizon ?? null;
    const latest = this.latest;
    const skip =
      horizon !== null && latest?.horizon === horizon && this.clock.now() - latest.at < held.heldEveryMs;
    if (skip)
      this.logger.debug(
        `skipped a vacuum of outbox_event_leases: the vacuum horizon (transaction ${horizon}) has not moved since ` +
          'the previous one (the doctor names what holds it)',
      );
    return { horizon, skip };
  }
}
