import { Logger } from '@nestjs/common';
import type { Clock } from '../model/clock';
import type { DueTenant } from '../model/due-tenant';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { RELAY_LOG_CONTEXT } from '../batch/tenant-batch';
import { isTenantWeight, MAX_TENANT_WEIGHT } from '../options/outbox-options';
import { errorText } from '../errors/error-text';

/** What `relay.tenantWeights` may hold: a map of tenant ids to weights, or a function of the tenant id. */
type TenantWeights = ResolvedOutboxOptions['relay']['tenantWeights'];

/**
 * How long after a round with several tenants a backlogged tenant alone still leaves a lane free and claims
 * `relay.batchSize` at most: a tenant whose events come every few ms is often not due at the round's start.
 */
export const SHARED_FOR_MS = 1000;

/**
 * How a round shares the relay between the tenants it visits (ADR 1106). Alone, a tenant gets the whole relay:
 * with a backlog, it is visited on every lane and its claims grow (ADR 0802, ADR 0803). With others — or alone
 * within SHARED_FOR_MS of a round with others — every claim is held to the tenant's share of `relay.batchSize`
 * (all of it for the heaviest tenant of the round, the others in proportion to their weights: `relay.tenantWeights`),
 * and a backlogged tenant leaves a lane to the others where the relay has two or more: the tenants without a
 * backlog are visited first, and the tenants woken while its batch runs are visited on the free lane at once
 * (`LateVisits`). Backlogged tenants are each visited once a round, the heaviest first, so they drain in the ratio
 * of their weights; lanes left over go to a backlogged tenant only when it is the only one. So another tenant's new
 * event waits for about one batch at most: none on a free lane, one of `relay.batchSize` on a single lane, the
 * grown ones in flight when the backlogged tenant had the relay to itself. Off (`fairShares` of the policy): every
 * tenant visited as when alone.
 */
export class TenantShares {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  /** The map's weights by lower-case tenant id (the planner's ids are lower case); null for a function. */
  private readonly listed: ReadonlyMap<string, number> | null;
  /** Tenants a weight function answered something invalid for: warned about once each. */
  private readonly warned = new Set<string>();
  /** When a round last visited several tenants (epoch ms). */
  private sharedAt = -Infinity;

  constructor(
    private readonly relay: Pick<ResolvedOutboxOptions['relay'], 'batchSize' | 'tenantWeights'>,
    private readonly on: boolean,
    private readonly clock: Clock,
  ) {
    const weights: TenantWeights = relay.tenantWeights;
    this.listed =
      weights === null || typeof weights === 'function'
        ? null
        : new Map(Object.entries(weights).map(([tenantId, weight]) => [tenantId.toLowerCase(), weight]));
  }

  /**
   * The tenant's weight: listed, or answered by the function; 1 when unlisted, or when the function's answer is
   * invalid or it throws (one tenant's weight never fails a round).
   */
  weight(tenantId: string): number {
    const weights = this.relay.tenantWeights;
    // relay.tenants may supply ids in upper case
    if (typeof weights !== 'function') return this.listed?.get(tenantId.toLowerCase()) ?? 1;
    let answer: string;
    try {
      const weight = weights(tenantId);
      if (isTenantWeight(weight)) return weight;
      answer = `returned ${String(weight)}`;
    } catch (error) {
      answer = `threw ${errorText(error)}`;
    }
    if (!this.warned.has(tenantId)) {
      this.warned.add(tenantId);
      this.logger.warn(
        `relay.tenantWeights ${answer} for tenant ${tenantId}; a weight is a number above 0 and at most ${MAX_TENANT_WEIGHT}: it weighs 1`,
      );
    }
    return 1;
  }

  /** A tenant woken while the round runs is visited on a lane left free (`LateVisits`): it is not alone. */
  late(due: DueTenant): DueTenant {
    this.sharedAt = this.clock.now();
    return due;
  }

  /**
   * The visits of a round's tenants on `lanes` lanes, in order; a tenant visited on several lanes is the same
   * entry each time (the relay counts it once).
   */
  visits(tenants: readonly DueTenant[], lanes: number): DueTenant[] {
    const everyLane = (due: DueTenant, count = lanes): DueTenant[] =>
      Array.from({ length: count }, () => due);
    if (!this.on) return tenants.flatMap((due) => (due.backlog ? everyLane(due) : [due]));
    const { batchSize } = this.relay;
    if (tenants.length <= 1) {
      const due = tenants[0];
      if (!due?.backlog) return [...tenants];
      if (this.clock.now() - this.sharedAt >= SHARED_FOR_MS) return everyLane(due);
      // others came lately: a lane left free for them, and claims of relay.batchSize
      return everyLane({ ...due, share: batchSize }, Math.max(1, lanes - 1));
    }
    this.sharedAt = this.clock.now();
    const weighed = tenants.map((due) => ({ due, weight: this.weight(due.tenantId) }));
    const heaviest = Math.max(...weighed.map((w) => w.weight));
    const shared = weighed.map(({ due, weight }) => ({
      due: { ...due, share: Math.max(1, Math.round((batchSize * weight) / heaviest)) },
      weight,
    }));
    const fresh = shared.filter((s) => !s.due.backlog).map((s) => s.due);
    const backlogged = shared
      .filter((s) => s.due.backlog)
      .sort((a, b) => b.weight - a.weight)
      .map((s) => s.due);
    // one backlogged tenant: the lanes the others leave (with two or more, extra lanes would skew the shares)
    const spare = backlogged.length === 1 ? Math.max(0, lanes - tenants.length) : 0;
    return [...fresh, ...backlogged.flatMap((due) => everyLane(due, 1 + spare))];
  }
}
