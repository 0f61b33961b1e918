/**
 * The relay's waits on the database, each bounded by `relay.roundTripTimeoutMs`: a claim, a batch (its
 * transaction's begin, a handler's savepoint rolled back or checked, its commit), the outcomes recorded outside a
 * batch, a lease extension of webhook and broker deliveries, a tenant's webhook subscriptions read for its round,
 * the scan for tenants with due work, the promotion of due delayed events, the registry heartbeat, the lease vacuum, the wake-up listener's check, and
 * the health check's read of the backlog, a retention purge, a metrics scrape's read.
 */
export type OutboxRoundTrip =
  | 'claim'
  | 'batch'
  | 'outcome'
  | 'leaseExtension'
  | 'subscriptions'
  | 'dueTenantScan'
  | 'promotion'
  | 'heartbeat'
  | 'leaseVacuum'
  | 'listen'
  | 'healthCheck'
  | 'retention'
  | 'metrics';

/**
 * A round trip to the database that got no reply within `relay.roundTripTimeoutMs`: its connection was closed
 * (never returned to the pool) and what it was part of was given up. Shown by the health indicator while it
 * lasts and by `stats` until the next one.
 */
export interface OutboxRelayStall {
  /** What was waiting. */
  roundTrip: OutboxRoundTrip;
  /** The tenant of the round, or null for a round trip of no one tenant (the scan, the heartbeat…). */
  tenantId: string | null;
  /** How long it waited before giving up, in ms (`relay.roundTripTimeoutMs`). */
  waitedMs: number;
  /** When it gave up (ISO 8601). */
  at: string;
  /**
   * When a round trip that began after it was answered again (ISO 8601): null while the database still does not
   * answer.
   */
  recoveredAt: string | null;
}
