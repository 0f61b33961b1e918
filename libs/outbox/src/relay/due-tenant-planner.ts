import { Logger } from '@nestjs/common';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxStorePort } from '../store/outbox-store.port';
import { isUuid } from '../model/outbox.constants';
import type { Clock } from '../model/clock';
import type { DueTenant } from '../model/due-tenant';
import { RELAY_LOG_CONTEXT } from '../batch/tenant-batch';

export type { DueTenant } from '../model/due-tenant';

/**
 * Longest time between two scans for due tenants while rounds go by hints (see `DueTenantPlanner.plan`): with
 * `pacedScans`, while a tenant has a backlog only.
 */
const FULL_SCAN_EVERY_MS = 100;

/**
 * Which tenants a round visits, and in what order: the tenants that wake-ups named (or whose last batch came
 * back full) first, then those a scan of `outbox_due_tenants` finds, from a cursor when there are more than one
 * round visits; or the tenants `relay.tenants` supplies.
 */
export class DueTenantPlanner {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  /** Tenants known to have new events (woken with their id, or their last batch came back full). */
  private readonly hinted = new Set<string>();
  /** Of those, the tenants whose last batch came back full. */
  private readonly backlogged = new Set<string>();
  /** Of those, the tenants wake-ups named since the round began (a lane may visit them late: `takeWoken`). */
  private readonly woken = new Set<string>();
  /** The tenants a lane visited late in this round (`takeWoken`): the scan's list does not bring them again. */
  private readonly takenLate = new Set<string>();
  /** Every tenant hinted for the next round came from a promotion of delayed events (`hintPromoted`). */
  private promotedOnly = false;
  /** When the last `outbox_due_tenants` scan ran, and whether it listed every due tenant. */
  private lastScan = { at: 0, complete: false };
  /** The last tenant a scan listed when it listed as many as one round visits: the next scan starts after it. */
  private lastTenant: string | null = null;

  constructor(
    private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStorePort,
    private readonly clock: Clock,
    /** `RelayPolicy.pacedScans`: wake-ups' rounds without a backlog scan once per poll interval. */
    private readonly pacedScans: boolean,
  ) {}

  /** Notes tenants with new events (ids that are not UUIDs are ignored). */
  hint(tenants: Iterable<string>): void {
    for (const tenant of tenants) {
      if (!isUuid(tenant)) continue;
      this.hinted.add(tenant.toLowerCase());
      this.woken.add(tenant.toLowerCase());
      this.promotedOnly = false;
    }
  }

  /**
   * The tenants a promotion of delayed events just made due (see `ScheduledPromoter`). When they are the round's
   * only tenants, the round visits them without scanning for due tenants unless the last scan is a poll interval
   * old: a promotion timer's round is not a wake-up for other work (retries, other tenants' events are found by
   * wake-ups naming them and by the scans, at least one per `relay.pollIntervalMs` while such rounds come).
   */
  hintPromoted(tenants: readonly string[]): void {
    if (tenants.length === 0) return;
    const alone = this.hinted.size === 0;
    this.hint(tenants);
    this.promotedOnly = alone;
  }

  /**
   * A tenant woken while the round runs, for a lane with nothing left to do (see `LateVisits`), except those
   * `busy` names (tenants this round visits with a backlog); taken, it is no longer hinted for the next round.
   */
  takeWoken(busy: (tenantId: string) => boolean): DueTenant | undefined {
    for (const tenantId of this.woken) {
      this.woken.delete(tenantId);
      if (busy(tenantId) || this.backlogged.has(tenantId)) continue;
      this.hinted.delete(tenantId);
      this.takenLate.add(tenantId);
      return { tenantId, hasNew: true, hasDue: false };
    }
    return undefined;
  }

  /** A batch of this tenant came back full: more is waiting, the next round can come straight back here. */
  noteFull(tenantId: string): void {
    this.promotedOnly = false;
    this.hinted.add(tenantId);
    this.backlogged.add(tenantId);
  }

  /**
   * Hands the round its tenants, in one or two goes (`visit`), and says whether due tenants were left for the
   * next round. The named tenants first: a round that also scans for due tenants runs the scan beside their
   * visits and visits what it found after them, so a wake-up never waits for the scan. Scans come when the last
   * one did not list every due tenant, whenever no tenant was named, and when the last one is older than
   * FULL_SCAN_EVERY_MS — with `pacedScans`, than `relay.pollIntervalMs` unless a named tenant has a backlog (its
   * last batch came back full): at a low rate every event's wake-up makes a round, and a scan every 100 ms was a
   * tenth of what each event cost (ADR 1201's addendum). While rounds keep coming, no tenant waits longer than
   * that for a scan to find it (between rounds, the poll is the bound). Too many named tenants for one round:
   * the scan takes them in turn with the others.
   */
  async plan(
    visit: (tenants: readonly DueTenant[]) => Promise<void>,
    stopping: () => boolean,
  ): Promise<boolean> {
    const { maxTenantsPerRound } = this.options.relay;
    if (this.options.relay.tenants) {
      const supplied = await this.suppliedTenants();
      this.hinted.clear();
      this.backlogged.clear();
      this.woken.clear();
      await visit(supplied.map((tenantId) => ({ tenantId, hasNew: true, hasDue: true })));
      return false;
    }
    const hinted = this.hinted.size <= maxTenantsPerRound ? [...this.hinted] : [];
    const promotedOnly = this.promotedOnly;
    this.promotedOnly = false;
    // copied only when a tenant has a backlog (mostly none at a low rate: no set made per round)
    const backlogged = this.backlogged.size === 0 ? null : new Set(this.backlogged);
    this.hinted.clear();
    this.backlogged.clear();
    this.woken.clear();
    this.takenLate.clear();
    // the scan runs beside the named tenants' visits, on its own connection: a round never waits for one, then
    // the other, and a tenant woken meanwhile is not held up by a scan between the visits (ADR 1106, 2026-12-06)
    const scan =
      stopping() ||
      (hinted.length > 0 &&
        // a round for a promotion's tenants alone scans once the last scan is a poll interval old, and so does a
        // wake-up's round without a backlog when scans are paced
        this.scanIsFresh(
          promotedOnly || (this.pacedScans && backlogged === null)
            ? this.options.relay.pollIntervalMs
            : FULL_SCAN_EVERY_MS,
        ))
        ? null
        : this.scan(maxTenantsPerRound);
    // its failure is the round's, once the visits are done (not an unhandled rejection meanwhile)
    scan?.catch(() => undefined);
    await visit(
      hinted.map((tenantId) => ({
        tenantId,
        hasNew: true,
        hasDue: false,
        backlog: backlogged?.has(tenantId) === true,
      })),
    );
    if (!scan) return false;
    const scanned = await scan;
    if (stopping()) return false;
    // a tenant visited above for its new events — named, or woken meanwhile and visited late — is visited again
    // only for the retries the scan says are due (its events committed since woke it for the next round; visited
    // here, it held a lane with no late visits and no backlogged tenant beside: ADR 1106, addendum "the last waits
    // for a round's end")
    const visited = new Set([...hinted, ...this.takenLate]);
    await visit(
      scanned
        .filter((due) => !visited.has(due.tenantId) || due.hasDue)
        .map((due) => (visited.has(due.tenantId) ? { ...due, hasNew: false } : due)),
    );
    return this.lastTenant !== null;
  }

  /** The due tenants, from the cursor; notes when the scan ran, whether it listed them all, and the next cursor. */
  private async scan(maxTenantsPerRound: number): Promise<DueTenant[]> {
    const scanned = await this.store.dueTenants({ limit: maxTenantsPerRound, after: this.lastTenant });
    this.lastScan = { at: this.clock.now(), complete: scanned.length < maxTenantsPerRound };
    // With more due tenants than one round visits, the next round starts after the last one visited.
    this.lastTenant = scanned.length === maxTenantsPerRound ? scanned[scanned.length - 1]!.tenantId : null;
    return scanned;
  }

  /** True when the last scan for due tenants listed every one of them, less than `withinMs` ago. */
  private scanIsFresh(withinMs: number): boolean {
    return this.lastScan.complete && this.clock.now() - this.lastScan.at < withinMs;
  }

  /** The tenants from `relay.tenants`; ids that are not UUIDs are skipped with a warning. */
  private async suppliedTenants(): Promise<string[]> {
    const tenants = await this.options.relay.tenants!();
    const valid = tenants.filter((tenant) => typeof tenant === 'string' && isUuid(tenant));
    if (valid.length < tenants.length) {
      this.logger.warn(
        `relay.tenants returned ${tenants.length - valid.length} ids that are not UUIDs; they were skipped`,
      );
    }
    return valid;
  }
}
