import { backoffProblems, countProblem, durationProblem } from '../options/outbox-options';
import { messages } from '../errors/outbox.messages';
import { reducePatterns, WEBHOOK_NAME_PATTERN } from '../webhooks/webhook-endpoint';
import type { OutboxBackoffOptions, ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OnOutboxEventOptions } from '../model/outbox-handler-options.interface';
import type { OutboxConsumerLimits } from '../model/outbox-consumer';
import { consumerLimits } from '../consumers/consumer-limits';

/** The settings every batch consumer (transport, broker) has, checked and merged with the module's. */
export interface ExternalConsumerSettings {
  eventPatterns: string[];
  ordered: boolean;
  timeoutMs: number;
  maxAttempts: number;
  backoff: Required<OutboxBackoffOptions>;
  /** Its `concurrency` and `rateLimit`, as the registry stores them; none when neither is set. */
  limits?: OutboxConsumerLimits;
}

/** What the settings are read from: one entry of `transports` or `brokers`. */
export interface ExternalConsumerInput {
  events?: unknown;
  ordered?: unknown;
  timeoutMs?: unknown;
  maxAttempts?: unknown;
  backoff?: unknown;
  concurrency?: unknown;
  rateLimit?: unknown;
}

/**
 * Checks one entry's name (unique in its list, `seen`) and common settings; every problem is pushed to `problems`,
 * each naming its field (`where` is e.g. `brokers[0] ("orders")`).
 */
export function resolveExternalConsumer(
  input: ExternalConsumerInput & { name?: unknown },
  where: string,
  list: { option: string; index: number; seen: Map<string, number> },
  options: ResolvedOutboxOptions,
  defaultTimeoutMs: number,
  problems: string[],
): ExternalConsumerSettings {
  if (typeof input.name !== 'string' || !WEBHOOK_NAME_PATTERN.test(input.name)) {
    problems.push(
      messages.badOption(`${where}.name`, 'a name of 1 to 100 letters, digits and _ . -', input.name),
    );
  } else if (list.seen.has(input.name)) {
    problems.push(messages.duplicateEntry(list.option, input.name, list.seen.get(input.name)!, list.index));
  } else {
    list.seen.set(input.name, list.index);
  }
  const eventPatterns = reducePatterns(input.events, `${where}.events`, (_field, message) =>
    problems.push(message),
  );
  const ordered = input.ordered ?? false;
  if (typeof ordered !== 'boolean')
    problems.push(messages.badOption(`${where}.ordered`, 'true or false', ordered));
  const { leaseMs } = options.relay;
  const timeoutMs = input.timeoutMs ?? Math.min(defaultTimeoutMs, leaseMs - 1);
  const maxAttempts = input.maxAttempts ?? options.maxAttempts;
  for (const problem of [
    durationProblem(`${where}.timeoutMs`, timeoutMs, { below: { name: 'relay.leaseMs', ms: leaseMs } }),
    countProblem(`${where}.maxAttempts`, maxAttempts),
  ])
    if (problem) problems.push(problem);
  let backoff = options.backoff;
  if (input.backoff !== undefined) {
    if (input.backoff === null || typeof input.backoff !== 'object') {
      problems.push(
        messages.badOption(`${where}.backoff`, 'an object { baseMs, capMs, jitter }', input.backoff),
      );
    } else {
      const given = Object.entries(input.backoff).filter(([, v]) => v !== undefined);
      backoff = { ...options.backoff, ...Object.fromEntries(given) };
      problems.push(...backoffProblems(`${where}.backoff`, backoff));
    }
  }
  // the limits of @OnOutboxEvent, checked by the same code: the claims enforce them whatever the consumer's kind
  const limits = consumerLimits(
    where,
    input as Pick<OnOutboxEventOptions, 'concurrency' | 'rateLimit'>,
    problems,
  );
  return {
    eventPatterns,
    ordered: ordered === true,
    timeoutMs: timeoutMs as number,
    maxAttempts: maxAttempts as number,
    backoff,
    ...(limits ? { limits } : {}),
  };
}

/** `where` of entry `index` of a list option: `transports[2] ("kafka")`. */
export function entryLabel(option: string, index: number, entry: unknown): string {
  const name = (entry as { name?: unknown } | null)?.name;
  return `${option}[${index}]${typeof name === 'string' ? ` ("${name}")` : ''}`;
}
