import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** What a promotion did, and when the next scheduled event is due. */
export interface PromoteScheduledRow {
  /** The tenants of the events made pending. */
  tenant_ids: string[];
  promoted: number;
  /** Milliseconds from now (the database's clock) until the earliest event still scheduled is due, or null. */
  next_due_in_ms: number | null;
}

/**
 * Makes up to `limit` due delayed events pending, each with a fresh `seq` (it joins its aggregate's order when it
 * becomes due), and says when the next one is due. A SECURITY DEFINER function (migration
 * OutboxScheduledEvents1764501600000) so the relay role sees every tenant under row-level security. It locks the
 * due rows with SKIP LOCKED: two relays promoting at once split them, and a row is promoted once. With nothing
 * scheduled it is two probes of an empty partial index (docs/adr/1102-delayed-events-are-promoted.md).
 */
export function promoteScheduled(n: OutboxNames, limit: number): SqlStatement {
  return {
    text: `select tenant_ids, promoted, next_due_in_ms from ${n.promoteScheduled}($1)`,
    values: [limit],
  };
}
