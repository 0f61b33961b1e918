import { backoffProblems } from '../options/outbox-options';
import { messages } from '../errors/outbox.messages';
import { inboxMessages } from './inbox.messages';
import type { OutboxInboxModuleOptions, ResolvedInboxOptions } from './outbox-inbox-options.interface';

/** Token of the inbox options after defaults were merged. */
export const OUTBOX_INBOX_OPTIONS = Symbol('OUTBOX_INBOX_OPTIONS');

/** The defaults of `OutboxInboxModule.forRoot()`. */
export const INBOX_DEFAULTS: ResolvedInboxOptions = {
  maxDeliveries: 5,
  redelivery: { baseMs: 1000, capMs: 60_000, jitter: 0.2 },
};

const NAME_MAX = 200;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

/** The options with their defaults, and every problem found in them. */
export function resolveInboxOptions(raw: OutboxInboxModuleOptions): {
  options: ResolvedInboxOptions;
  problems: string[];
} {
  const options: ResolvedInboxOptions = {
    maxDeliveries: raw.maxDeliveries ?? INBOX_DEFAULTS.maxDeliveries,
    redelivery: { ...INBOX_DEFAULTS.redelivery, ...withoutUndefined(raw.redelivery ?? {}) },
  };
  const problems = [
    maxDeliveriesProblem('OutboxInboxModule', options.maxDeliveries),
    ...backoffProblems('OutboxInboxModule redelivery', options.redelivery),
  ].filter((p): p is string => p !== null);
  if (raw.isGlobal !== undefined && typeof raw.isGlobal !== 'boolean')
    problems.push(messages.badOption('OutboxInboxModule isGlobal', 'true or false', raw.isGlobal));
  return { options, problems };
}

/** Why `value` is not a consumer name, or null. */
export function consumerProblem(where: string, value: unknown): string | null {
  return typeof value === 'string' &&
    value.length > 0 &&
    value.length <= NAME_MAX &&
    !CONTROL_CHARS.test(value)
    ? null
    : inboxMessages.badConsumer(where, value);
}

/** Why `value` is not a number of deliveries, or null. */
export function maxDeliveriesProblem(where: string, value: unknown): string | null {
  return Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= 1000
    ? null
    : inboxMessages.badMaxDeliveries(where, value);
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
