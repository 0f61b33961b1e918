import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { RelayPolicy } from '../options/relay-policy';

/**
 * How long a batch of handlers that write nothing may take, from its claim to its commit sent, for its tenant's
 * next claim to take more (see `ClaimSizer.ran`, docs/adr/0803-claims-grow-for-quick-batches.md).
 */
export const QUICK_BATCH_MS = 100;

/** What a tenant's batch did, as far as the size of its next claim goes (the claim sizer's input). */
export interface BatchSummary {
  /** The claim came back with as many events (or due deliveries) as it asked for. */
  full: boolean;
  /** Every handler ran without `context.manager`, and the batch went to its commit as it ran. */
  noWrites: boolean;
  /** A handler's failure made the batch run again (with a savepoint per handler, or in parts). */
  reran: boolean;
  /** The batch had webhook or broker deliveries. */
  external: boolean;
  /** From the claim sent to the commit sent. */
  ms: number;
}

/**
 * How many events one lane's claims take, tenant by tenant: `relay.batchSize`; fewer, for every tenant, after a
 * claim that outlived its statement bound (`relay.leaseMs`), growing back by doubling after full claims that took
 * under a quarter of it; more, up to the policy's `claimGrowth.max` (`relay.maxBatchSize`), for a tenant whose
 * full batches run without a savepoint per handler and take under QUICK_BATCH_MS (see `ran`), unless
 * `claimGrowth` is off. Pure: the relay tells it what happened.
 */
export class ClaimSizer {
  /** `relay.batchSize`, or less after a claim that timed out. */
  private limit: number;
  /** Tenants whose next claim takes more than `relay.batchSize`, with its size (none while `limit` is lower). */
  private readonly grown = new Map<string, number>();

  constructor(
    private readonly relay: Pick<ResolvedOutboxOptions['relay'], 'batchSize' | 'leaseMs'>,
    private readonly growth: RelayPolicy['claimGrowth'],
    /** Batches whose handlers write grow too: they run without a savepoint each (`optimisticBatches`, ADR 1001). */
    private readonly writingGrows: boolean,
  ) {
    this.limit = relay.batchSize;
  }

  /** The size of this tenant's next claim. */
  next(tenantId: string): number {
    return (this.limit === this.relay.batchSize ? this.grown.get(tenantId) : undefined) ?? this.limit;
  }

  /**
   * A claim of `limit` came back (`full` or not) after `ms`: a shrunk limit grows back after quick full claims of
   * its size (a smaller claim — a tenant's share, ADR 1106 — says nothing about it).
   */
  claimed(limit: number, full: boolean, ms: number): void {
    const { batchSize, leaseMs } = this.relay;
    if (limit === this.limit && limit < batchSize && full && ms < leaseMs / 4)
      this.limit = Math.min(batchSize, limit * 2);
  }

  /**
   * A claim of `limit` outlived its statement bound: every claim of this lane takes half as many, at most
   * `relay.batchSize`. Returns false when one event at a time was already too many.
   */
  timedOut(tenantId: string, limit: number): boolean {
    if (limit === 1) return false;
    this.grown.delete(tenantId);
    this.limit = Math.max(1, Math.min(this.relay.batchSize, Math.floor(limit / 2)));
    return true;
  }

  /**
   * A tenant's batch ran (`null`: it claimed nothing, or failed). A full batch of handlers that wrote nothing
   * through `context.manager` — or wrote without a savepoint each (`writingGrows`) — that did not run again after
   * a handler's failure, with no webhook or broker deliveries, doubles the tenant's next claim when it took under
   * QUICK_BATCH_MS, and halves it when it took longer (never below `relay.batchSize`); any other batch brings it
   * back to `relay.batchSize`.
   */
  ran(tenantId: string, batch: BatchSummary | null): void {
    const { batchSize } = this.relay;
    const { growth } = this;
    if (
      !growth ||
      batch === null ||
      !batch.full ||
      (!batch.noWrites && !this.writingGrows) ||
      batch.reran ||
      batch.external ||
      this.limit < batchSize
    ) {
      this.grown.delete(tenantId);
      return;
    }
    const size = this.grown.get(tenantId) ?? batchSize;
    const next =
      batch.ms < QUICK_BATCH_MS ? Math.min(growth.max, size * 2) : Math.max(batchSize, Math.floor(size / 2));
    if (next > batchSize) this.grown.set(tenantId, next);
    else this.grown.delete(tenantId);
  }
}
