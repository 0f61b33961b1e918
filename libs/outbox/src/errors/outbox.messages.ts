/** The wording of every error the outbox raises, in one place. */
/**
 * The rule "an attempt started and never finished": its relay died or stalled before recording an outcome, and
 * its lease expired. Written by the claim (SQL, see `claimDueDeliveries`, which takes this text as a parameter)
 * and by the relay.
 */
const STALE_ATTEMPT = 'started but its relay never recorded an outcome (lease expired)';

export const messages = {
  /** After `attempt `: the text the claim writes on a delivery taken over from an expired lease. */
  staleAttemptSuffix: (): string => ` ${STALE_ATTEMPT}`,
  batchEnded: (): string => 'the batch transaction was ended before its outcomes were recorded',
  stall: (what: string, tenantId: string | null, ms: number, connecting: boolean): string =>
    `the database gave no reply to the relay's ${what}${tenantId === null ? '' : ` for tenant ${tenantId}`} ` +
    `within ${ms} ms (relay.roundTripTimeoutMs)${connecting ? ', waiting for a connection from the pool' : ''}: ` +
    'its connection was closed and the round given up (its leases expire, and fencing keeps what it wrote ' +
    'from landing twice); the next round starts on a fresh connection' +
    (connecting
      ? ' (set connectionTimeoutMillis in the DataSource extra, or connectTimeoutMS, so that connecting to a ' +
        'server that does not answer fails too)'
      : ''),
  stallOver: (what: string, ms: number): string =>
    `the database answers the relay again, ${ms} ms after it gave up its ${what}`,
  staleLeaseRecovered: (attempt: number): string => `attempt ${attempt} ${STALE_ATTEMPT}`,
  likelyPoison: (attempt: number): string =>
    `attempt ${attempt} started but never finished (its relay died or stalled); dead-lettered as a likely poison event`,
  noTransaction: (): string =>
    'OutboxService.enqueue needs an open transaction, so the event commits with your business writes (or not at ' +
    'all): pass the EntityManager of dataSource.transaction(async (manager) => …), or a QueryRunner after ' +
    'queryRunner.startTransaction(), or, with the transactionHost option, call it inside a @Transactional() ' +
    'method or TransactionHost.withTransaction(…).',
  noManager: (): string =>
    'OutboxService.enqueue was called without an EntityManager or QueryRunner: pass the one of your open ' +
    "transaction, or set the outbox option transactionHost to join @nestjs-cls/transactional's ambient transaction.",
  clsMissing: (why: string): string =>
    'the outbox option transactionHost needs nestjs-cls, @nestjs-cls/transactional and ' +
    `@nestjs-cls/transactional-adapter-typeorm installed (${why}); install them, or turn the option off`,
  clsNoHost: (label: string, connectionName: string | undefined): string =>
    `the outbox option transactionHost names ${label}, which the app does not provide: import ` +
    `ClsModule.forRoot({ global: true, plugins: [new ClsPluginTransactional({ ${
      connectionName === undefined ? '' : `connectionName: '${connectionName}', `
    }adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken(…) }) })] })`,
  clsUnsupported: (label: string): string =>
    `${label} lacks the methods the outbox binds a handler's transaction with; use @nestjs-cls/transactional 3.x`,
  clsOtherDataSource: (label: string, dataSource: string | undefined): string =>
    `${label} wraps another DataSource than the outbox's (${dataSource ? `"${dataSource}"` : 'the default'}); ` +
    'give its TransactionalAdapterTypeOrm the dataSourceToken of that DataSource, or point transactionHost at ' +
    'the host that does',
  clsNotReady: (): string =>
    'OutboxService.enqueue was called without a manager before the outbox module finished its boot; call it ' +
    'after app.init()',
  releasedRunner: (): string =>
    'OutboxService.enqueue was given a transaction whose QueryRunner is already released; pass the manager (or runner) of a live transaction.',
  payloadRejected: (field: string, schema: string, issues: string): string =>
    `${field} does not match the ${schema} schema: ${issues}. Fix the payload, or send it as another schemaVersion ` +
    'that has a schema of its own.',
  noSchemaForVersion: (field: string, eventName: string, version: number, registered: number[]): string =>
    `${field} is ${version}, but the events option has schemas for versions ${registered.join(', ')} of ` +
    `"${eventName}" only; add one for version ${version}, or send one of those.`,
  notASchema: (field: string, value: unknown): string =>
    `option ${field} must be a Standard Schema (a zod, valibot or arktype schema…) or an object of them by ` +
    `schemaVersion ({ 1: schemaV1, 2: schemaV2 }), got ${describe(value)}`,
  validateWithoutSchema: (host: string, pattern: string): string =>
    `${host} asks for validatePayload, but the events option has no schema for any event "${pattern}" matches; ` +
    'add the schema to OutboxModule.forRoot({ events }), or drop validatePayload',
  notUuid: (field: string, value: unknown): string =>
    `${field} must be a UUID like 3f1c6a52-8b7e-4d2a-9c1e-0a5b6c7d8e9f, got ${describe(value)}.`,
  badEventName: (field: string, value: unknown): string =>
    `${field} must be lowercase dotted words like "crm.contact.created.v1" (letters, digits, "_" and "-"; ` +
    `at least two parts; at most 200 characters), got ${describe(value)}.`,
  badPattern: (where: string, value: unknown): string =>
    `${where} listens to ${describe(value)}, which is not an event name: use an exact name like ` +
    '"crm.contact.created.v1", a prefix like "crm.contact.*", or "*".',
  badPayload: (field: string, why: string): string => `${field} cannot be stored as JSON faithfully: ${why}.`,
  payloadTooLarge: (field: string, bytes: number, limit: number): string =>
    `${field} is ${bytes} bytes of JSON, over the limit of ${limit} bytes; store large data elsewhere and ` +
    'send a reference, or raise the maxPayloadBytes option.',
  badText: (field: string, max: number, value: unknown): string =>
    `${field} must be a string of 1 to ${max} characters without control characters or lone surrogates, got ${describe(value)}.`,
  badSchemaVersion: (field: string, value: unknown): string =>
    `${field} must be a positive integer (1, 2, …), got ${describe(value)}: leave it out for version 1, or pass ` +
    'the number of the version (of the events option) whose payload shape the event has.',
  badDate: (field: string, value: unknown): string =>
    `${field} must be a valid Date, got ${describe(value)}.`,
  badDelay: (field: string, value: unknown): string =>
    `${field} must be a finite number of milliseconds, 0 or more, got ${describe(value)}: leave it out to ` +
    'deliver at once.',
  ancientDate: (field: string, value: Date): string =>
    `${field} is before 4713 BC, the earliest instant PostgreSQL stores, got ${value.toISOString()}: any past ` +
    'instant delivers at once, so give a later one or leave it out.',
  delayTooLong: (field: string, value: number, max: number): string =>
    `${field} must be at most ${max} ms (the span of a JS Date), got ${value}: a later instant could not be stored.`,
  bothDelays: (where: string, deliverAt: unknown, delayMs: unknown): string =>
    `${where}.delayMs and ${where}.deliverAt are both given (${describe(delayMs)}, ${describe(deliverAt)}): ` +
    'give one of them, delayMs for "this long after the insert" or deliverAt for "at this instant".',
  notAnArray: (field: string, value: unknown): string =>
    `${field} must be an array of events, got ${describe(value)}.`,
  badDedupe: (field: string, value: unknown): string =>
    `${field} must be an object { key, mode?, windowMs? }, got ${describe(value)}: leave it out to enqueue without ` +
    'an idempotency key.',
  badDedupeMode: (field: string, modes: readonly string[], value: unknown): string =>
    `${field} must be one of ${modes.map((m) => `'${m}'`).join(', ')}, got ${describe(value)}; leave it out for 'ignore'.`,
  debounceWithoutDelay: (field: string): string =>
    `${field} is 'debounce', which moves a delayed event's delivery time, but the event has no deliverAt or ` +
    "delayMs: give one, or use mode 'replace'.",
  badDedupeWindow: (field: string, max: number, value: unknown): string =>
    `${field} must be a whole number of milliseconds from 1 to ${max} (366 days), got ${describe(value)}; leave it ` +
    'out for 24 hours.',
  notAnObject: (field: string, value: unknown): string =>
    `${field} must be an event object, got ${describe(value)}.`,
  missingDataSource: (name: string | undefined): string =>
    `no TypeORM DataSource ${name ? `named "${name}" ` : ''}is available: import TypeOrmModule.forRoot(${
      name ? `{ name: '${name}', … }` : '…'
    }) in your app module (the outbox writes through it), or set the outbox option dataSource to the right name.`,
  missingScheduler: (): string =>
    'the relay needs @nestjs/schedule: import ScheduleModule.forRoot() once in your app module, ' +
    'or set relay.enabled to false on instances that only enqueue.',
  duplicateConsumer: (name: string, hosts: string[]): string =>
    `two consumers are named "${name}" (${hosts.join(', ')}); give one a distinct name with @OnOutboxEvent(…, { consumer: '…' })`,
  requestScoped: (host: string): string =>
    `${host} is request-scoped (or depends on a request-scoped provider); outbox consumers must be singletons`,
  badOption: (field: string, expected: string, value: unknown): string =>
    `option ${field} must be ${expected}, got ${describe(value)}`,
  badDoctorThreshold: (option: string, problem: string): string =>
    `option ${option}: ${problem} (the thresholds are listed in docs/doctor.md)`,
  movedOption: (was: string, now: string, why: string): string =>
    `option ${was} is now ${now} (${why}): move its value there`,
  unknownPublicInMigration: (migration: string, excerpt: string): string =>
    `migration ${migration} sends "${excerpt}", and outboxMigrationsFor cannot tell whether that public is the ` +
    'schema or the PUBLIC role: teach sqlInSchema (migrations/outbox-migrations.factory.ts) this spelling',
  handlerTimeout: (consumer: string, ms: number): string =>
    `handler ${consumer} did not settle within ${ms} ms`,
  tenantChanged: (consumer: string, tenantSetting: string, value: unknown, tenantId: string): string =>
    `handler ${consumer} changed ${tenantSetting} to ${describe(value)} in the batch of tenant ${tenantId}; ` +
    "handlers run in their event's tenant context: to act for another tenant, open a transaction of your own",
  transactionEnded: (consumer: string): string =>
    `handler ${consumer} ended the batch transaction (COMMIT, ROLLBACK or the like on its connection); the outbox ` +
    'owns that transaction and commits it with the outcomes: use context.manager.transaction() for a nested one',
  transactionControl: (consumer: string, what: string): string =>
    `handler ${consumer} tried ${what} through context.manager, which was refused: the outbox owns the batch ` +
    'transaction and commits it with the outcomes; use context.manager.transaction() for a nested one',
  sealChecked: (consumer: string): string =>
    `handler ${consumer} checked every deferred constraint of the batch transaction (set constraints all ` +
    "immediate), the relay's seal among them, which was refused: name your own constraints, e.g. " +
    '`set constraints my_fk immediate`',
  transactionLeftOpen: (consumer: string): string =>
    `handler ${consumer} returned with a nested transaction (queryRunner.startTransaction()) still open; ` +
    'commit or roll it back before returning, or use context.manager.transaction()',
  deferredViolation: (consumer: string, error: string): string =>
    `handler ${consumer} left a deferred constraint violated (checked when it returned): ${error}`,
  batchFailed: (error: string): string => `the batch transaction failed: ${error}`,
  managerAfterSettle: (consumer: string): string =>
    `handler ${consumer} used context.manager after it returned or timed out; await every query inside the handler`,
  snoozeLimit: (consumer: string, max: number, why: string): string =>
    `consumer ${consumer} snoozed this delivery ${max} times already (maxSnoozes ${max}), so this snooze is ` +
    `charged as a failed attempt: ${why}. Raise maxSnoozes in @OnOutboxEvent, or let the attempt fail`,
  snoozed: (ms: number): string => `the handler asked to be called again in ${ms} ms (context.retryAfter)`,
  badRetryAfter: (consumer: string, value: unknown, maxMs: number): string =>
    `handler ${consumer} called context.retryAfter(${describe(value)}): give a delay in ms, a finite number from 0 ` +
    `to ${maxMs} (24 hours)`,
  retryAfterLate: (consumer: string): string =>
    `handler ${consumer} called context.retryAfter after it returned or timed out: call it before the handler returns`,
  badInteger: (field: string, min: number, max: number | null, value: unknown): string =>
    `${field} must be an integer ${max === null ? `≥ ${min}` : `from ${min} to ${max}`}, got ${describe(value)}.`,
  consumerStillLive: (name: string, orphanAfterMs: number): string =>
    `consumer "${name}" was reported by an instance within the last ${orphanAfterMs} ms (registry.orphanAfterMs), so ` +
    'it would be registered again at the next heartbeat; remove it from every instance first, then forget it.',
  pauseUnknownConsumer: (name: string): string =>
    `consumer "${name}" is not in the persisted registry (outbox_consumers): pause a consumer by the name an ` +
    'instance registered (stats and the board list them); a webhook subscription is paused with setSubscriptionPaused.',
  backfillUnknownConsumer: (name: string): string =>
    `consumer "${name}" is not in the persisted registry (outbox_consumers): a backfill creates the rows of a ` +
    'consumer that an instance hosts; start an instance that hosts it (its relay enabled), then backfill.',
  backfillConsumerNotLive: (name: string, liveWithinMs: number): string =>
    `consumer "${name}" was not reported by any instance within the last ${liveWithinMs} ms (registry.liveWithinMs): ` +
    'the events still pending would not fan out to it, so the backfill would miss them; start an instance that ' +
    'hosts it, then backfill.',
  unguardedAdmin: (): string =>
    "OutboxAdminModule.forRoot() was given no guard, and its routes read and replay every tenant's events: pass " +
    'guards: [YourAuthGuard] (the guard sees request.params.tenantId), or allowUnguarded: true for a local demo only.',
  malformedGuards: (owner: string, given: unknown, badElement: number | null): string =>
    `${owner}.forRoot() option guards must be a non-empty array of guards (classes implementing CanActivate, or ` +
    `instances with canActivate), got ${describeGuards(given, badElement)}; write guards: [YourAuthGuard]. The ` +
    'routes are not served until it is fixed.',
  unguardedBoard: (): string =>
    'OutboxBoardModule.forRoot() was given no guard, and the board shows payloads and replays events: pass ' +
    'guards: [YourAuthGuard], or allowUnguarded: true for a local demo only.',
  boardTenants: (): string =>
    "OutboxBoardModule.forRoot() needs tenants: (request) => the tenant ids this operator may see (or 'all'), " +
    "since tenancy is 'multi': the board never guesses which tenants a request may read.",
  missingPeer: (feature: string, pkg: string): string =>
    `${feature} needs the package ${pkg}, which is not installed: npm install ${pkg}`,
  lostEnqueueStatement: (): string =>
    "the transaction's connection no longer had the outbox's named insert (SQLSTATE 26000: a pooler moved the " +
    'session to another server connection, or DISCARD ALL / DEALLOCATE ran on it), so the transaction is aborted ' +
    'and nothing of it was written: run it again. Enqueues of this app run unnamed from now on. Behind PgBouncer ' +
    'in transaction mode (before 1.21, or without max_prepared_statements), set preparedStatements: false.',
  rowLevelSecurity: (tenantId: string, tenantSetting: string): string =>
    `row-level security refused an event for tenant ${tenantId}: the transaction's ${tenantSetting} names another ` +
    `tenant or none. Run select set_config('${tenantSetting}', '${tenantId}', true) in the same transaction before ` +
    'writing, or enqueue for the tenant your transaction belongs to.',
  duplicateWebhook: (name: string, first: number, again: number): string =>
    `webhooks[${first}] and webhooks[${again}] are both named "${name}"; give each webhook a distinct name (its consumer is webhook:<name>)`,
  duplicateEntry: (option: string, name: string, first: number, again: number): string =>
    `${option}[${first}] and ${option}[${again}] are both named "${name}"; give each a distinct name`,
  badTransport: (field: string, why: string): string =>
    `option ${field} must be an object with send(batch) or a class implementing OutboxTransport, but ${why}; ` +
    'see docs/transports.md',
  webhookUrlCredentials: (field: string): string =>
    `${field} carries a user name or password, which fetch refuses to send; move them to headers (e.g. { authorization: 'Basic …' })`,
  webhookBadHeader: (field: string, name: string): string =>
    `${field} sets ${describe(name)}, which is not a header name the webhook may set (content-type and the webhook-* and outbox-* headers are set by the outbox)`,
  webhookSubscriptionsDisabled: (): string =>
    'webhook subscriptions are turned off on this instance (OutboxWebhooksModule is not imported, or its subscriptions.enabled is false), so a new one would never be delivered; enable them first',
  webhookSubscriptionExists: (name: string): string =>
    `this tenant already has a webhook subscription named ${describe(name)}; remove it first or choose another name`,
  webhookTargetRefused: (field: string, host: string, address: string): string =>
    `${field} names ${describe(host)}${address === host ? '' : `, which resolves to ${address}`}: a loopback, private, ` +
    'link-local (cloud metadata), unique-local, carrier-grade NAT, unspecified or reserved address, which tenant ' +
    'subscriptions may not reach; use a public address (an operator may allow ranges with ' +
    "OutboxWebhooksModule's subscriptions.allowPrivateTargets)",
  webhookTargetUnresolved: (field: string, host: string, code: string): string =>
    `${field} names ${describe(host)}, which does not resolve (${code}); a subscription's host must resolve to a public address when it is added`,
  subscriptionSecretNeedsKey: (): string =>
    "a subscription secret is stored encrypted, and this app configured no key: set OutboxWebhooksModule's subscriptions.secretKeys " +
    "to [{ id: 'k1', key: '<32 bytes in base64, e.g. openssl rand -base64 32>' }], or add the subscription without a secret",
  subscriptionSecretKeyMissing: (keyId: string): string =>
    `the secret was sealed with key ${describe(keyId)}, which OutboxWebhooksModule's subscriptions.secretKeys no longer lists; put it back (after the current key) until resealSecrets() ran for every tenant`,
  subscriptionSecretUnreadable: (keyId: string): string =>
    `the secret sealed with key ${describe(keyId)} does not decrypt: the key under that id changed, or the row was altered`,
  webhookMissingHeaders: (names: string[]): string =>
    `the request lacks one of the headers ${names.join(', ')}: it was not sent by a webhook with a secret`,
  webhookBadTimestamp: (value: string): string =>
    `webhook-timestamp ${describe(value)} is not a Unix time in seconds`,
  webhookStaleTimestamp: (skewSeconds: number, toleranceSeconds: number): string =>
    `webhook-timestamp is ${Math.abs(skewSeconds)} s ${skewSeconds >= 0 ? 'old' : 'in the future'}, beyond the tolerance of ${toleranceSeconds} s (a replay, or a clock out of sync)`,
  webhookBadSignature: (id: string): string =>
    `no v1 signature of webhook ${describe(id)} matches the secret: wrong secret, or the body was changed (verify the raw body, not re-serialised JSON)`,
  webhookBadBody: (id: string): string => `the body of webhook ${describe(id)} is signed but is not JSON`,
  searchNeedsField: (): string =>
    'a search needs at least one of eventId, aggregateId, correlationId and eventName (searching a whole ' +
    'history by none of them would read every event of the tenant).',
  searchTooLong: (field: string, timeoutMs: number): string =>
    `the search by ${field} ran past ${timeoutMs / 1000} s and was stopped: without the search indexes it reads the ` +
    `tenant's events one by one. Add them (once, without blocking writes): ` +
    `npx nestjs-pg-outbox sql --search-indexes | psql "$DATABASE_URL" (see docs/board.md#search).`,
  aggregateTypeAlone: (): string =>
    'aggregateType is searched together with aggregateId: give the aggregate id too (the index starts with it).',
  bulkStatus: (action: 'replay' | 'purge', value: unknown): string =>
    action === 'replay'
      ? `status must be "dead" or "failed" (leave it out for both), got ${describe(value)}.`
      : `status must be "dead" (a purge deletes settled events only: a failed delivery is still retrying), got ${describe(value)}.`,
  bulkRange: (): string => 'to must be later than from (events created at or after from, and before to).',
};

/** What a malformed `guards` option holds: the element that is not a guard, or the value that is not an array. */
function describeGuards(given: unknown, badElement: number | null): string {
  if (Array.isArray(given) && badElement !== null)
    return `an array whose element ${badElement} is ${describeGuard(given[badElement])}`;
  if (typeof given === 'function')
    return `the class ${given.name || '(anonymous)'} on its own, not in an array`;
  if (typeof (given as { canActivate?: unknown } | null)?.canActivate === 'function')
    return `${describe(given)} on its own, not in an array`;
  return describeGuard(given);
}

function describeGuard(value: unknown): string {
  if (typeof value === 'function')
    return `the class ${value.name || '(anonymous)'}, which has no canActivate method`;
  if (typeof value === 'object' && value !== null && !Array.isArray(value))
    return `${describe(value)} without canActivate`;
  return describe(value);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'object')
    return Array.isArray(value) ? 'an array' : `an object (${value.constructor?.name ?? 'no prototype'})`;
  if (typeof value === 'function') return `a function (${value.name || 'anonymous'})`;
  return String(value as number | boolean | symbol);
}
