import { DEFAULT_TENANT_SETTING, isUuid } from '../model/outbox.constants';
import { stripUndefined } from '../model/strip-undefined';
import { DEFAULT_OUTBOX_SCHEMA, outboxNames, schemaProblem } from '../model/table-names';
import { messages } from '../errors/outbox.messages';
import type {
  OutboxModuleOptions,
  OutboxWakeUps,
  ResolvedOutboxOptions,
} from './outbox-module-options.interface';

/** Defaults, written once (the names are not an option: they are made from `schema`). */
export const OUTBOX_DEFAULTS: Omit<ResolvedOutboxOptions, 'names'> = {
  dataSource: undefined,
  schema: DEFAULT_OUTBOX_SCHEMA,
  preparedStatements: true,
  relay: {
    enabled: true,
    pollIntervalMs: 1000,
    batchSize: 100,
    maxBatchSize: 500,
    concurrency: 'auto',
    leaseMs: 60_000,
    roundTripTimeoutMs: 61_000,
    shutdownTimeoutMs: 10_000,
    maxTenantsPerRound: 100,
    scheduledCoalesceMs: 200,
    wakeUps: 'auto',
    vacuumLeasesEvery: 10_000,
    tenants: null,
    tenantWeights: null,
  },
  maxAttempts: 5,
  backoff: { baseMs: 1000, capMs: 300_000, jitter: 0.2 },
  handlerTimeoutMs: 30_000,
  maxPayloadBytes: 256 * 1024,
  tenantSetting: DEFAULT_TENANT_SETTING,
  tenancy: 'multi',
  registry: { heartbeatMs: 30_000, liveWithinMs: 7 * 24 * 3600_000, orphanAfterMs: 3600_000 },
  retention: { publishedDays: 7, intervalMs: 60_000, batchSize: 1000 },
  events: null,
  transactionHost: false,
};

const DEFAULT_NAMES = outboxNames(DEFAULT_OUTBOX_SCHEMA);

/** Options merged with defaults, plus every problem found in them (reported together at boot). */
export interface OptionsResolution {
  options: ResolvedOutboxOptions;
  problems: string[];
}

/** Merges user options over the defaults and checks each value. */
export function resolveOutboxOptions(raw: OutboxModuleOptions = {}): OptionsResolution {
  const options: ResolvedOutboxOptions = {
    ...OUTBOX_DEFAULTS,
    ...stripUndefined(raw),
    // replaced below once the schema is checked
    names: DEFAULT_NAMES,
    relay: { ...OUTBOX_DEFAULTS.relay, ...stripUndefined(raw.relay ?? {}) },
    backoff: { ...OUTBOX_DEFAULTS.backoff, ...stripUndefined(raw.backoff ?? {}) },
    registry: { ...OUTBOX_DEFAULTS.registry, ...stripUndefined(raw.registry ?? {}) },
    retention: { ...OUTBOX_DEFAULTS.retention, ...stripUndefined(raw.retention ?? {}) },
  };
  const problems: string[] = [];
  const report = (problem: string | null): void => {
    if (problem) problems.push(problem);
  };
  // the names are spliced into SQL text: made only from a schema that passed the check (boot fails otherwise)
  const schemaRule = schemaProblem(options.schema);
  if (schemaRule === null) options.names = outboxNames(options.schema);
  if (schemaRule !== null) problems.push(messages.badOption('schema', schemaRule, options.schema));
  const { relay, registry, retention } = options;
  report(durationProblem('relay.pollIntervalMs', relay.pollIntervalMs));
  report(countProblem('relay.batchSize', relay.batchSize));
  if (raw.relay?.maxBatchSize === undefined)
    relay.maxBatchSize = Math.max(relay.maxBatchSize, relay.batchSize);
  else if (
    countProblem('relay.maxBatchSize', relay.maxBatchSize) !== null ||
    relay.maxBatchSize < relay.batchSize
  )
    problems.push(
      messages.badOption(
        'relay.maxBatchSize',
        `an integer no smaller than relay.batchSize (${relay.batchSize})`,
        relay.maxBatchSize,
      ),
    );
  if (relay.concurrency !== 'auto' && countProblem('relay.concurrency', relay.concurrency) !== null)
    problems.push(
      messages.badOption('relay.concurrency', 'a positive integer, or "auto"', relay.concurrency),
    );
  report(durationProblem('relay.leaseMs', relay.leaseMs));
  // a little over the relay's statement bound (relay.leaseMs): the server cancels a slow statement first
  if (raw.relay?.roundTripTimeoutMs === undefined && Number.isSafeInteger(relay.leaseMs))
    relay.roundTripTimeoutMs = Math.min(MAX_DURATION_MS, relay.leaseMs + ROUND_TRIP_GRACE_MS);
  report(
    durationProblem('relay.roundTripTimeoutMs', relay.roundTripTimeoutMs, { zero: 'no client-side bound' }),
  );
  report(durationProblem('relay.shutdownTimeoutMs', relay.shutdownTimeoutMs));
  report(countProblem('relay.maxTenantsPerRound', relay.maxTenantsPerRound));
  report(
    durationProblem('relay.scheduledCoalesceMs', relay.scheduledCoalesceMs, {
      zero: 'promote at every due instant',
    }),
  );
  problems.push(...tenantWeightProblems(relay.tenantWeights));
  report(
    countProblem('relay.vacuumLeasesEvery', relay.vacuumLeasesEvery, 'leave the lease table to autovacuum'),
  );
  report(countProblem('maxAttempts', options.maxAttempts));
  report(
    durationProblem('handlerTimeoutMs', options.handlerTimeoutMs, {
      below: { name: 'relay.leaseMs', ms: relay.leaseMs },
    }),
  );
  report(countProblem('maxPayloadBytes', options.maxPayloadBytes));
  report(durationProblem('registry.heartbeatMs', registry.heartbeatMs));
  report(durationProblem('registry.liveWithinMs', registry.liveWithinMs));
  report(durationProblem('registry.orphanAfterMs', registry.orphanAfterMs));
  // outbox_purge_settled refuses a cut-off under an hour (migration OutboxPurgeFloor1764450300000).
  const days = retention.publishedDays;
  if (!Number.isFinite(days) || (days !== 0 && (days < 1 / 24 || days > 36_500))) {
    problems.push(
      messages.badOption(
        'retention.publishedDays',
        'a number of days from 1/24 (one hour) to 36500, or 0 (0 turns retention off)',
        days,
      ),
    );
  }
  report(durationProblem('retention.intervalMs', retention.intervalMs));
  report(countProblem('retention.batchSize', retention.batchSize));
  if (options.tenancy !== 'multi' && options.tenancy !== 'single') {
    problems.push(messages.badOption('tenancy', '"multi" or "single"', options.tenancy));
  }
  problems.push(...backoffProblems('backoff', options.backoff));
  if (!/^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$/.test(options.tenantSetting)) {
    problems.push(
      messages.badOption(
        'tenantSetting',
        'a custom setting name like "app.current_tenant_id"',
        options.tenantSetting,
      ),
    );
  }
  // 0.2.0: the webhooks and the brokers are modules of their own (docs/upgrading.md)
  for (const [was, now] of MOVED_TO_FEATURES) {
    if (was in raw) problems.push(messages.movedOption(was, now, 'a feature module of its own since 0.2.0'));
  }
  if (raw.relay && 'preparedStatements' in raw.relay)
    problems.push(
      messages.movedOption(
        'relay.preparedStatements',
        'preparedStatements',
        "it covers enqueue's insert too",
      ),
    );
  if (typeof options.preparedStatements !== 'boolean')
    problems.push(messages.badOption('preparedStatements', 'true or false', options.preparedStatements));
  if (typeof relay.enabled !== 'boolean')
    problems.push(messages.badOption('relay.enabled', 'true or false', relay.enabled));
  if (!WAKE_UPS.includes(relay.wakeUps))
    problems.push(
      messages.badOption(
        'relay.wakeUps',
        `one of ${WAKE_UPS.map((w) => `'${w}'`).join(', ')}`,
        relay.wakeUps,
      ),
    );
  // 0.2.0: one option for the wake-ups (docs/upgrading.md)
  for (const [was, now] of MOVED_TO_WAKE_UPS) {
    if (raw.relay && was in raw.relay)
      problems.push(messages.movedOption(`relay.${was}`, now, 'one option for the wake-ups since 0.2.0'));
  }
  return { options, problems };
}

/** The largest weight `relay.tenantWeights` accepts. */
export const MAX_TENANT_WEIGHT = 10_000;

/** True when `weight` is one `relay.tenantWeights` accepts: a finite number above 0, at most MAX_TENANT_WEIGHT. */
export function isTenantWeight(weight: unknown): weight is number {
  return typeof weight === 'number' && Number.isFinite(weight) && weight > 0 && weight <= MAX_TENANT_WEIGHT;
}

/**
 * `relay.tenantWeights`: null, a function, or a map of tenant ids (UUIDs) to weights, each a finite number above 0
 * and at most MAX_TENANT_WEIGHT; one problem per bad entry.
 */
function tenantWeightProblems(weights: unknown): string[] {
  if (weights === null || typeof weights === 'function') return [];
  if (typeof weights !== 'object' || Array.isArray(weights))
    return [
      messages.badOption(
        'relay.tenantWeights',
        'a map of tenant ids to weights, a function (tenantId) => weight, or null',
        weights,
      ),
    ];
  const problems: string[] = [];
  for (const [tenantId, weight] of Object.entries(weights as Record<string, unknown>)) {
    if (!isUuid(tenantId))
      problems.push(
        messages.badOption('relay.tenantWeights', 'tenant ids that are UUIDs as its keys', tenantId),
      );
    else if (!isTenantWeight(weight))
      problems.push(
        messages.badOption(
          `relay.tenantWeights["${tenantId}"]`,
          `a number above 0 and at most ${MAX_TENANT_WEIGHT}`,
          weight,
        ),
      );
  }
  return problems;
}

const WAKE_UPS: readonly OutboxWakeUps[] = ['auto', 'listen', 'notify', 'both', 'off'];

/** Options of `relay` before 0.2.0 that `relay.wakeUps` replaced, and what to write instead. */
const MOVED_TO_WAKE_UPS: readonly (readonly [string, string])[] = [
  ['notify', "relay.wakeUps ('notify' or 'both'; false: 'listen' or 'off')"],
  ['listen', "relay.wakeUps ('listen' or 'both'; false: 'notify' or 'off')"],
  ['notifyGapMs', "relay.wakeUps ('notify' or 'both', paced by the library: drop the gap)"],
];

/**
 * Whether this instance listens for wake-ups and whether it notifies after its commits, as `relay.wakeUps` says
 * (`'auto'`: an instance whose relay is enabled listens, one whose relay is off notifies). Only an instance whose
 * relay is enabled listens.
 */
export function wakeUpSides(relay: Pick<ResolvedOutboxOptions['relay'], 'enabled' | 'wakeUps'>): {
  listen: boolean;
  notify: boolean;
} {
  const mode = relay.wakeUps === 'auto' ? (relay.enabled ? 'listen' : 'notify') : relay.wakeUps;
  return {
    listen: relay.enabled && (mode === 'listen' || mode === 'both'),
    notify: mode === 'notify' || mode === 'both',
  };
}

/** Options of `OutboxModule` before 0.2.0 that belong to a feature module now, and where each went. */
const MOVED_TO_FEATURES: readonly (readonly [string, string])[] = [
  ['webhooks', "OutboxWebhooksModule.forRoot({ webhooks }) of 'nestjs-pg-outbox/webhooks'"],
  ['webhookSubscriptions', "OutboxWebhooksModule.forRoot({ subscriptions }) of 'nestjs-pg-outbox/webhooks'"],
  ['brokers', "OutboxBrokersModule.forRoot({ brokers }) of 'nestjs-pg-outbox/brokers'"],
  ['transports', "OutboxBrokersModule.forRoot({ transports }) of 'nestjs-pg-outbox/brokers'"],
];

/** Checks a backoff block (module-wide or per consumer). */
export function backoffProblems(
  field: string,
  backoff: { baseMs: number; capMs: number; jitter: number },
): string[] {
  const problems = [
    durationProblem(`${field}.baseMs`, backoff.baseMs, { zero: 'retry at once' }),
    durationProblem(`${field}.capMs`, backoff.capMs, { zero: 'retry at once' }) ??
      (backoff.capMs < backoff.baseMs
        ? messages.badOption(`${field}.capMs`, `a number ≥ baseMs (${backoff.baseMs})`, backoff.capMs)
        : null),
  ];
  if (!Number.isFinite(backoff.jitter) || backoff.jitter < 0 || backoff.jitter > 1)
    problems.push(messages.badOption(`${field}.jitter`, 'a fraction from 0 to 1', backoff.jitter));
  return problems.filter((p): p is string => p !== null);
}

/**
 * Longest duration an option may give, in ms: 2³¹−1 (about 24.8 days). Node runs a longer timer after 1 ms, and
 * the SQL statements pass durations as 32-bit integers.
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;

/** How much longer than `relay.leaseMs` the relay waits for a round trip by default (see `roundTripTimeoutMs`). */
const ROUND_TRIP_GRACE_MS = 1000;

/** Bounds of {@link durationProblem}. */
export interface DurationBounds {
  /** What 0 means, when 0 is allowed; without it the smallest value is 1. */
  zero?: string;
  /** Another duration this one must stay below, e.g. `relay.leaseMs`. */
  below?: { name: string; ms: number };
}

/** The problem with a duration in ms (an integer from 0 or 1 to {@link MAX_DURATION_MS}), or null. */
export function durationProblem(field: string, value: unknown, bounds: DurationBounds = {}): string | null {
  const min = bounds.zero === undefined ? 1 : 0;
  const max = Math.min(MAX_DURATION_MS, bounds.below ? bounds.below.ms - 1 : MAX_DURATION_MS);
  if (Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max) return null;
  const upper = bounds.below
    ? `below ${bounds.below.name} (${bounds.below.ms})`
    : `≤ ${MAX_DURATION_MS} (about 24.8 days)`;
  const zero = bounds.zero === undefined ? '' : ` (0: ${bounds.zero})`;
  return messages.badOption(field, `an integer number of ms ≥ ${min} and ${upper}${zero}`, value);
}

/**
 * The problem with a count (a positive safe integer; 0 too when `zero` says what it means), or null.
 */
export function countProblem(field: string, value: unknown, zero?: string): string | null {
  const min = zero === undefined ? 1 : 0;
  if (Number.isSafeInteger(value) && (value as number) >= min) return null;
  return messages.badOption(
    field,
    zero === undefined ? 'a positive integer' : `an integer ≥ 0 (0: ${zero})`,
    value,
  );
}
