import { Inject, Injectable, Logger } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
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
 */
@Injectable()
export class LeaseVacuum {
  private readonly logger = new Logger(LeaseVacuum.name);
  private released = 0;
  private running: Promise<void> | null = null;
  /** Whether the role may vacuum the table: unknown until the first vacuum is due. */
  private allowed: boolean | undefined;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
  ) {}

  /**
   * Counts leases this instance released (their outcome committed); once enough have been, starts a vacuum
   * and returns it (it never rejects). Null when no vacuum started.
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
      // under the relay's own bounds, not the role's or the database's statement_timeout
      await this.store.relayCommand(q.vacuumLeases(this.options.names), 'leaseVacuum');
    } catch (error) {
      this.logger.warn(`could not vacuum outbox_event_leases: ${errorText(error)}`);
    }
  }
}
