import { consumerLimits } from '../consumers/consumer-limits';
import { messages } from '../errors/outbox.messages';
import type { OutboxConsumerLimits } from '../model/outbox-consumer';
import type { WebhookProblem } from './webhook-endpoint';

/** A subscription's limits as given (`OutboxWebhookSubscriptionInput`) or stored (its row's `options`). */
export interface SubscriptionLimitsInput {
  concurrency?: unknown;
  rateLimit?: unknown;
}

/**
 * Checks a subscription's `concurrency` and `rateLimit` with `@OnOutboxEvent`'s rules (`consumerLimits`) and
 * returns them as the claims take a tenant consumer's limits: a subscription serves one tenant, so its cap and
 * its rate count within that tenant (`tenantConcurrency`, a rate per tenant). `perTenant` is refused (it would
 * say nothing more), and `perKey` too: the per-key log is pruned by retention for consumers of the persisted
 * registry only (docs/adr/1104-consumer-limits-in-the-database.md, "Amended 2026-12-06: subscriptions"). Each
 * problem names its field (`concurrency`, `rateLimit`) and, in the sentence, `where` and the option.
 */
export function subscriptionLimits(
  input: SubscriptionLimitsInput,
  where: string,
): { limits: OutboxConsumerLimits | undefined; problems: WebhookProblem[] } {
  const problems: WebhookProblem[] = [];
  const { concurrency, rateLimit } = input;
  const check = (
    field: 'concurrency' | 'rateLimit',
    value: unknown,
    refused: string[],
    known: string[],
  ): void => {
    if (value === undefined) return;
    const found: string[] = [];
    const given = value as Record<string, unknown>;
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      for (const key of Object.keys(given))
        if (refused.includes(key))
          found.push(messages.badOption(`${field}.${key} of ${where}`, refusal(field, key), given[key]));
        else if (!known.includes(key))
          found.push(
            messages.badOption(
              `${field}.${key} of ${where}`,
              `left out: ${field} takes ${known.join(' and ')} only (a misspelt field would leave the partner without the limit meant)`,
              given[key],
            ),
          );
    if (found.length === 0) consumerLimits(where, { [field]: value }, found);
    problems.push(...found.map((message) => ({ field, message })));
  };
  check('concurrency', concurrency, ['perTenant'], ['global']);
  check('rateLimit', rateLimit, ['perTenant', 'perKey'], ['limit', 'intervalMs']);
  if (problems.length > 0 || (concurrency === undefined && rateLimit === undefined))
    return { limits: undefined, problems };
  const cap = concurrency as { global?: number } | undefined;
  const rate = rateLimit as { limit: number; intervalMs: number } | undefined;
  return {
    limits: {
      concurrency: null,
      tenantConcurrency: cap?.global ?? null,
      rateLimit: rate?.limit ?? null,
      rateIntervalMs: rate?.intervalMs ?? null,
      ratePerTenant: true,
      rateKey: null,
    },
    problems,
  };
}

/** What to do instead of a field a subscription does not take. */
function refusal(field: string, key: string): string {
  if (key === 'perKey')
    return 'left out: a subscription takes no per-key limit (one subscription per partner)';
  return field === 'concurrency'
    ? 'left out: a subscription serves one tenant, so concurrency.global is its cap'
    : 'left out: a subscription serves one tenant, so its rate is that tenant’s already';
}
