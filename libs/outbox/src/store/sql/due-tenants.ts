import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * Tenants with due work, and which kind: new events (`has_new`), or deliveries due for retry or whose lease
 * expired (`has_due`), so a round runs only the statements it needs. A SECURITY DEFINER
 * function (see the migration) so the relay role can see across tenants under row-level security; it walks the
 * partial indexes one tenant at a time (a loose index scan), so its cost grows with tenants, not rows.
 */
export function dueTenants(n: OutboxNames, limit: number, afterTenant: string | null): SqlStatement {
  return {
    text: `select tenant_id, has_new, has_due from ${n.dueTenants}($1, $2)`,
    values: [limit, afterTenant],
  };
}
