import { countProblem, durationProblem } from '../options/outbox-options';
import { messages } from '../errors/outbox.messages';
import type { OnOutboxEventOptions } from '../model/outbox-handler-options.interface';
import type { OutboxConsumerLimits } from '../model/outbox-consumer';

/** The largest count the registry's integer columns hold. */
const MAX_LIMIT = 2_147_483_647;

/**
 * The limits `@OnOutboxEvent`'s `concurrency` and `rateLimit` ask for, as the registry stores them, or undefined
 * when neither is set. Each problem found is pushed to `problems`, naming `host` and the option
 * (docs/flow-control.md#concurrency-and-rate-limits).
 */
export function consumerLimits(
  host: string,
  options: Pick<OnOutboxEventOptions, 'concurrency' | 'rateLimit'>,
  problems: string[],
): OutboxConsumerLimits | undefined {
  const { concurrency, rateLimit } = options;
  if (concurrency === undefined && rateLimit === undefined) return undefined;
  const found: string[] = [];
  const count = (field: string, value: unknown): void => {
    const problem = countProblem(field, value) ?? (Number(value) > MAX_LIMIT ? tooLarge(field, value) : null);
    if (problem) found.push(problem);
  };
  if (concurrency !== undefined) {
    if (!isRecord(concurrency) || (concurrency.global === undefined && concurrency.perTenant === undefined))
      found.push(
        messages.badOption(
          `concurrency of ${host}`,
          '{ global?, perTenant? } with at least one count',
          concurrency,
        ),
      );
    else {
      if (concurrency.global !== undefined) count(`concurrency.global of ${host}`, concurrency.global);
      if (concurrency.perTenant !== undefined)
        count(`concurrency.perTenant of ${host}`, concurrency.perTenant);
      // a cap per tenant above the global one never applies: most likely the two were swapped
      if (found.length === 0 && Number(concurrency.perTenant) > Number(concurrency.global))
        found.push(
          messages.badOption(
            `concurrency.perTenant of ${host}`,
            `at most concurrency.global (${String(concurrency.global)}): one tenant never has more in flight than all tenants together`,
            concurrency.perTenant,
          ),
        );
    }
  }
  if (rateLimit !== undefined) {
    if (!isRecord(rateLimit))
      found.push(
        messages.badOption(`rateLimit of ${host}`, '{ limit, intervalMs, perTenant?, perKey? }', rateLimit),
      );
    else {
      count(`rateLimit.limit of ${host}`, rateLimit.limit);
      const interval = durationProblem(`rateLimit.intervalMs of ${host}`, rateLimit.intervalMs);
      if (interval) found.push(interval);
      if (rateLimit.perTenant !== undefined && typeof rateLimit.perTenant !== 'boolean')
        found.push(messages.badOption(`rateLimit.perTenant of ${host}`, 'a boolean', rateLimit.perTenant));
      if (rateLimit.perKey !== undefined) found.push(...rateKeyProblems(host, rateLimit));
    }
  }
  problems.push(...found);
  if (found.length > 0) return undefined;
  return {
    concurrency: concurrency?.global ?? null,
    tenantConcurrency: concurrency?.perTenant ?? null,
    rateLimit: rateLimit?.limit ?? null,
    rateIntervalMs: rateLimit?.intervalMs ?? null,
    ratePerTenant: rateLimit?.perTenant === true,
    rateKey: rateKeyOf(rateLimit?.perKey),
  };
}

/** A payload path: dot-separated field names, each without dots, blanks or control characters. */
const PAYLOAD_PATH = /^[^.\s\p{Cc}]+(\.[^.\s\p{Cc}]+)*$/u;

/** `rateLimit.perKey`'s problems: one of its two forms, and not beside `perTenant` (keys are per tenant already). */
function rateKeyProblems(host: string, rateLimit: object): string[] {
  const { perKey, perTenant } = rateLimit as Record<string, unknown>;
  const field = `rateLimit.perKey of ${host}`;
  const payload = isRecord(perKey) ? perKey.payload : undefined;
  const valid =
    perKey === 'aggregate' ||
    (isRecord(perKey) &&
      Object.keys(perKey).length === 1 &&
      typeof payload === 'string' &&
      payload.length <= 200 &&
      PAYLOAD_PATH.test(payload));
  if (!valid)
    return [
      messages.badOption(field, "'aggregate' or { payload: 'field.path' } (1 to 200 characters)", perKey),
    ];
  if (perTenant !== undefined)
    return [
      messages.badOption(
        `rateLimit.perTenant of ${host}`,
        'left out beside rateLimit.perKey: a key is counted within its tenant already',
        perTenant,
      ),
    ];
  return [];
}

/** How the registry stores `rateLimit.perKey` (`outbox_consumers.rate_key`), read back by the due claim. */
function rateKeyOf(perKey: NonNullable<OnOutboxEventOptions['rateLimit']>['perKey']): string | null {
  if (perKey === undefined) return null;
  return perKey === 'aggregate' ? 'aggregate' : `payload:${perKey.payload}`;
}

function tooLarge(field: string, value: unknown): string {
  return messages.badOption(field, `a positive integer ≤ ${MAX_LIMIT}`, value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
