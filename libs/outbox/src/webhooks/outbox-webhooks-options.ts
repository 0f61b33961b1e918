import { stripUndefined } from '../model/strip-undefined';
import { messages } from '../errors/outbox.messages';
import { durationProblem } from '../options/outbox-options';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { secretKeyProblems } from './subscription-secret-cipher';
import { allowedTargetProblem } from './webhook-target-guard';
import type {
  OutboxWebhooksModuleOptions,
  ResolvedOutboxWebhooksOptions,
} from './outbox-webhooks-options.interface';

/** The defaults of `OutboxWebhooksModule.forRoot()`. */
export const OUTBOX_WEBHOOKS_DEFAULTS: ResolvedOutboxWebhooksOptions = {
  webhooks: [],
  subscriptions: {
    enabled: true,
    cacheTtlMs: 5000,
    pausedRecheckMs: 60_000,
    timeoutMs: 10_000,
    allowPrivateTargets: [],
    responseBodyInErrors: false,
    secretKeys: [],
  },
};

/** How boot errors name an option of the module's `subscriptions`. */
export function subscriptionsOption(field: string): string {
  return `OutboxWebhooksModule subscriptions.${field}`;
}

/** The webhook options merged with defaults, plus every problem found in them (reported together at boot). */
export interface OutboxWebhooksResolution {
  options: ResolvedOutboxWebhooksOptions;
  problems: string[];
}

/**
 * Merges user options over the defaults and checks them; each webhook is checked later, by the consumer factory,
 * with the consumer it becomes. `core` gives `relay.leaseMs`, which a request's timeout must stay below.
 */
export function resolveOutboxWebhooksOptions(
  raw: OutboxWebhooksModuleOptions | undefined,
  core: Pick<ResolvedOutboxOptions, 'relay'>,
): OutboxWebhooksResolution {
  const given = raw ?? {};
  const problems: string[] = [];
  const report = (problem: string | null): void => {
    if (problem !== null) problems.push(problem);
  };
  const rawSubscriptions: unknown = given.subscriptions;
  const subscriptionsGiven =
    rawSubscriptions !== undefined && rawSubscriptions !== null && typeof rawSubscriptions === 'object';
  if (rawSubscriptions !== undefined && !subscriptionsGiven)
    problems.push(messages.badOption('OutboxWebhooksModule subscriptions', 'an object', rawSubscriptions));
  const options: ResolvedOutboxWebhooksOptions = {
    webhooks: Array.isArray(given.webhooks) ? [...given.webhooks] : OUTBOX_WEBHOOKS_DEFAULTS.webhooks,
    subscriptions: {
      ...OUTBOX_WEBHOOKS_DEFAULTS.subscriptions,
      ...(subscriptionsGiven ? stripUndefined(given.subscriptions!) : {}),
    },
  };
  if (given.webhooks !== undefined && !Array.isArray(given.webhooks))
    problems.push(
      messages.badOption('OutboxWebhooksModule webhooks', 'an array of webhooks', given.webhooks),
    );
  const { subscriptions } = options;
  for (const flag of ['enabled', 'responseBodyInErrors'] as const) {
    if (typeof subscriptions[flag] !== 'boolean')
      problems.push(messages.badOption(subscriptionsOption(flag), 'true or false', subscriptions[flag]));
  }
  const allowed: unknown = subscriptions.allowPrivateTargets;
  if (!Array.isArray(allowed)) {
    problems.push(
      messages.badOption(
        subscriptionsOption('allowPrivateTargets'),
        'an array of addresses or CIDR ranges',
        allowed,
      ),
    );
    options.subscriptions.allowPrivateTargets = [];
  } else {
    allowed.forEach((entry, i) =>
      report(allowedTargetProblem(subscriptionsOption(`allowPrivateTargets[${i}]`), entry)),
    );
  }
  problems.push(...secretKeyProblems(subscriptionsOption('secretKeys'), subscriptions.secretKeys));
  if (!Array.isArray(subscriptions.secretKeys)) options.subscriptions.secretKeys = [];
  report(durationProblem(subscriptionsOption('cacheTtlMs'), subscriptions.cacheTtlMs));
  report(durationProblem(subscriptionsOption('pausedRecheckMs'), subscriptions.pausedRecheckMs));
  // When left unset, it is capped below relay.leaseMs where it is used.
  report(
    durationProblem(
      subscriptionsOption('timeoutMs'),
      subscriptions.timeoutMs,
      subscriptionsGiven && given.subscriptions!.timeoutMs !== undefined
        ? { below: { name: 'relay.leaseMs', ms: core.relay.leaseMs } }
        : {},
    ),
  );
  return { options, problems };
}
