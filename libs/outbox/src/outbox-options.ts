import { DEFAULT_TENANT_SETTING } from './outbox.constants';
import { messages } from './errors/outbox.messages';
import type {
  OutboxModuleOptions,
  ResolvedOutboxOptions,
} from './interfaces/outbox-module-options.interface';

/** Defaults, written once. */
export const OUTBOX_DEFAULTS: ResolvedOutboxOptions = {
  dataSource: undefined,
  relay: {
    enabled: true,
    pollIntervalMs: 1000,
    batchSize: 100,
    leaseMs: 60_000,
    shutdownTimeoutMs: 10_000,
    maxTenantsPerRound: 100,
    notify: true,
    notifyGapMs: 2,
    listen: true,
    preparedStatements: true,
    vacuumLeasesEvery: 2000,
    tenants: null,
  },
  maxAttempts: 5,
  backoff: { baseMs: 1000, capMs: 300_000, jitter: 0.2 },
  handlerTimeoutMs: 30_000,
  maxPayloadBytes: 256 * 1024,
  tenantSetting: DEFAULT_TENANT_SETTING,
  tenancy: 'multi',
  registry: { heartbeatMs: 30_000, liveWithinMs: 7 * 24 * 3600_000, orphanAfterMs: 3600_000 },
  retention: { publishedDays: 7, intervalMs: 60_000, batchSize: 1000 },
  webhooks: [],
  webhookSubscriptions: { enabled: true, cacheTtlMs: 5000, pausedRecheckMs: 60_000, timeoutMs: 10_000 },
  events: null,
  transactionHost: false,
};

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
    relay: { ...OUTBOX_DEFAULTS.relay, ...stripUndefined(raw.relay ?? {}) },
    backoff: { ...OUTBOX_DEFAULTS.backoff, ...stripUndefined(raw.backoff ?? {}) },
    registry: { ...OUTBOX_DEFAULTS.registry, ...stripUndefined(raw.registry ?? {}) },
    retention: { ...OUTBOX_DEFAULTS.retention, ...stripUndefined(raw.retention ?? {}) },
    webhooks: Array.isArray(raw.webhooks) ? [...raw.webhooks] : OUTBOX_DEFAULTS.webhooks,
    webhookSubscriptions: {
      ...OUTBOX_DEFAULTS.webhookSubscriptions,
      ...stripUndefined(raw.webhookSubscriptions ?? {}),
    },
  };
  // By default only instances that do not relay themselves wake the others: an instance with a relay picks up
  // its own events at once, and a NOTIFY per commit would cost the app's write path for nothing.
  if (raw.relay?.notify === undefined) options.relay.notify = !options.relay.enabled;
  const problems: string[] = [];
  const positive = (field: string, value: number): void => {
    if (!Number.isSafeInteger(value) || value <= 0)
      problems.push(messages.badOption(field, 'a positive integer', value));
  };
  /** An integer ≥ 0, where 0 has a meaning of its own (`expected` says which). */
  const nonNegative = (field: string, value: number, expected: string): void => {
    if (!Number.isSafeInteger(value) || value < 0) problems.push(messages.badOption(field, expected, value));
  };
  positive('relay.pollIntervalMs', options.relay.pollIntervalMs);
  positive('relay.batchSize', options.relay.batchSize);
  positive('relay.leaseMs', options.relay.leaseMs);
  positive('relay.shutdownTimeoutMs', options.relay.shutdownTimeoutMs);
  positive('relay.maxTenantsPerRound', options.relay.maxTenantsPerRound);
  nonNegative(
    'relay.notifyGapMs',
    options.relay.notifyGapMs,
    'an integer number of ms ≥ 0 (0: one NOTIFY per commit)',
  );
  nonNegative(
    'relay.vacuumLeasesEvery',
    options.relay.vacuumLeasesEvery,
    'an integer ≥ 0 (0: leave the lease table to autovacuum)',
  );
  positive('maxAttempts', options.maxAttempts);
  positive('handlerTimeoutMs', options.handlerTimeoutMs);
  positive('maxPayloadBytes', options.maxPayloadBytes);
  positive('registry.heartbeatMs', options.registry.heartbeatMs);
  positive('registry.liveWithinMs', options.registry.liveWithinMs);
  positive('registry.orphanAfterMs', options.registry.orphanAfterMs);
  if (!Number.isFinite(options.retention.publishedDays) || options.retention.publishedDays < 0) {
    problems.push(
      messages.badOption(
        'retention.publishedDays',
        'a number of days ≥ 0 (0 turns retention off)',
        options.retention.publishedDays,
      ),
    );
  }
  positive('retention.intervalMs', options.retention.intervalMs);
  positive('retention.batchSize', options.retention.batchSize);
  if (options.tenancy !== 'multi' && options.tenancy !== 'single') {
    problems.push(messages.badOption('tenancy', '"multi" or "single"', options.tenancy));
  }
  problems.push(...backoffProblems('backoff', options.backoff));
  if (options.handlerTimeoutMs >= options.relay.leaseMs) {
    problems.push(
      messages.badOption(
        'handlerTimeoutMs',
        `shorter than relay.leaseMs (${options.relay.leaseMs})`,
        options.handlerTimeoutMs,
      ),
    );
  }
  if (!/^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$/.test(options.tenantSetting)) {
    problems.push(
      messages.badOption(
        'tenantSetting',
        'a custom setting name like "app.current_tenant_id"',
        options.tenantSetting,
      ),
    );
  }
  // Each webhook is checked by the explorer, with the consumers it becomes.
  if (raw.webhooks !== undefined && !Array.isArray(raw.webhooks))
    problems.push(messages.badOption('webhooks', 'an array of webhooks', raw.webhooks));
  for (const flag of ['enabled', 'notify', 'listen', 'preparedStatements'] as const) {
    if (typeof options.relay[flag] !== 'boolean')
      problems.push(messages.badOption(`relay.${flag}`, 'true or false', options.relay[flag]));
  }
  if (typeof options.webhookSubscriptions.enabled !== 'boolean') {
    problems.push(
      messages.badOption(
        'webhookSubscriptions.enabled',
        'true or false',
        options.webhookSubscriptions.enabled,
      ),
    );
  }
  positive('webhookSubscriptions.cacheTtlMs', options.webhookSubscriptions.cacheTtlMs);
  positive('webhookSubscriptions.pausedRecheckMs', options.webhookSubscriptions.pausedRecheckMs);
  positive('webhookSubscriptions.timeoutMs', options.webhookSubscriptions.timeoutMs);
  if (
    raw.webhookSubscriptions?.timeoutMs !== undefined &&
    options.webhookSubscriptions.timeoutMs >= options.relay.leaseMs
  ) {
    problems.push(
      messages.badOption(
        'webhookSubscriptions.timeoutMs',
        `shorter than relay.leaseMs (${options.relay.leaseMs})`,
        options.webhookSubscriptions.timeoutMs,
      ),
    );
  }
  return { options, problems };
}

/** Checks a backoff block (module-wide or per consumer). */
export function backoffProblems(
  field: string,
  backoff: { baseMs: number; capMs: number; jitter: number },
): string[] {
  const problems: string[] = [];
  if (!Number.isFinite(backoff.baseMs) || backoff.baseMs < 0)
    problems.push(messages.badOption(`${field}.baseMs`, 'a number ≥ 0', backoff.baseMs));
  if (!Number.isFinite(backoff.capMs) || backoff.capMs < backoff.baseMs) {
    problems.push(
      messages.badOption(`${field}.capMs`, `a number ≥ baseMs (${backoff.baseMs})`, backoff.capMs),
    );
  }
  if (!Number.isFinite(backoff.jitter) || backoff.jitter < 0 || backoff.jitter > 1) {
    problems.push(messages.badOption(`${field}.jitter`, 'a fraction from 0 to 1', backoff.jitter));
  }
  return problems;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
