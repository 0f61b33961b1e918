/** A tenant with due work, and which kind. */
export interface DueTenant {
  tenantId: string;
  /** It has events not fanned out yet. */
  hasNew: boolean;
  /** It has deliveries due: retries whose time came, leases that expired. */
  hasDue: boolean;
  /** Set by the planner, not the scan: the tenant's last batch came back full (a backlog waits). */
  backlog?: boolean;
  /**
   * Set by the relay when other tenants are due too: the most events (or due deliveries) this visit's claim
   * takes, the tenant's weighted share of `relay.batchSize` (see relay/tenant-shares.ts).
   */
  share?: number;
}
