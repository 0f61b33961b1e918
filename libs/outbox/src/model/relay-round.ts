/** What one relay round did; `runOnce()` and `drain()` return it. */
export interface RelayRoundResult {
  /** Tenants visited. */
  tenants: number;
  /** New events fanned out to their consumers. */
  eventsClaimed: number;
  /** Deliveries claimed (new, retries and recovered leases). */
  deliveriesClaimed: number;
  /** Deliveries whose handler succeeded. */
  succeeded: number;
  /** Deliveries that failed and will be retried. */
  failed: number;
  /** Deliveries that failed for the last time. */
  dead: number;
  /**
   * Deliveries whose outcome this relay could not record because another relay took them over after this one's
   * lease expired (an in-process batch with any of them is rolled back whole; see README, stale leases).
   */
  leaseLost: number;
}

/** A result with every count at zero. */
export function emptyRound(): RelayRoundResult {
  return {
    tenants: 0,
    eventsClaimed: 0,
    deliveriesClaimed: 0,
    succeeded: 0,
    failed: 0,
    dead: 0,
    leaseLost: 0,
  };
}

/** Adds `b` into `a`. */
export function addRound(a: RelayRoundResult, b: RelayRoundResult): RelayRoundResult {
  return {
    tenants: a.tenants + b.tenants,
    eventsClaimed: a.eventsClaimed + b.eventsClaimed,
    deliveriesClaimed: a.deliveriesClaimed + b.deliveriesClaimed,
    succeeded: a.succeeded + b.succeeded,
    failed: a.failed + b.failed,
    dead: a.dead + b.dead,
    leaseLost: a.leaseLost + b.leaseLost,
  };
}
