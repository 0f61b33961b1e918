import type { DataSource, QueryRunner } from 'typeorm';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import type { Clock } from '../model/clock';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { DueTenant } from '../model/due-tenant';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type {
  BatchClosing,
  ClaimAnswer,
  ClaimRequest,
  HandlerChannel,
  OutboxStorePort,
  ScheduledPromotion,
  TenantConnection,
} from './outbox-store.port';

/**
 * A store for unit specs of the relay (not part of the package): answers what the spec tells it to, and writes
 * down every operation asked of it, in order, in `log`. No database.
 */
export class FakeStore implements OutboxStorePort {
  /** Every operation, in order: `dueTenants`, `claim`, `commitBatch`… with their requests. */
  readonly log: { op: string; tenantId?: string; request?: unknown }[] = [];
  /** Answers of `dueTenants`, one per scan (then none). */
  readonly scans: DueTenant[][] = [];
  /** Answers of `promoteScheduled`, one per promotion (then nothing promoted, nothing scheduled). */
  readonly promotions: ScheduledPromotion[] = [];
  /** Answers of claims, one per claim (then nothing claimed); an Error is thrown instead. */
  readonly claims: (ClaimAnswer | Error)[] = [];
  /** Outcomes recorded outside a batch's commit, and those it committed with. */
  readonly recorded: DeliveryOutcome[] = [];
  readonly committed: DeliveryOutcome[] = [];
  /** Says why a batch's commit fails (an error to throw), or null when it goes through; none: every one does. */
  commitFails: ((closing: BatchClosing) => Error | null) | null = null;
  /** Holds a batch's commit of the tenant until the promise it returns resolves (null, or none: done at once). */
  commitHeld: ((tenantId: string) => Promise<void> | null) | null = null;
  /** The tenant connections handed out, in order. */
  readonly connections: FakeTenantConnection[] = [];
  stall = null;
  pool = 10;

  poolSize(): number {
    return this.pool;
  }

  promoteScheduled(request: { limit: number }): Promise<ScheduledPromotion> {
    this.log.push({ op: 'promoteScheduled', request });
    return Promise.resolve(this.promotions.shift() ?? { tenantIds: [], promoted: 0, nextDueInMs: null });
  }

  dueTenants(request: { limit: number; after: string | null }): Promise<DueTenant[]> {
    this.log.push({ op: 'dueTenants', request });
    return Promise.resolve(this.scans.shift() ?? []);
  }

  heartbeat(request: {
    instanceId: string;
    startedAt: Date | null;
    consumers: readonly OutboxConsumer[];
  }): Promise<{ startedAt: Date; limited: string[] }> {
    this.log.push({ op: 'heartbeat', request: { consumers: request.consumers.map((c) => c.name) } });
    return Promise.resolve({ startedAt: request.startedAt ?? new Date(0), limited: [] });
  }

  leaveRegistry(): Promise<void> {
    this.log.push({ op: 'leaveRegistry' });
    return Promise.resolve();
  }

  extendLeases(request: { tenantId: string; deliveryIds: readonly string[] }): Promise<void> {
    this.log.push({ op: 'extendLeases', tenantId: request.tenantId, request: request.deliveryIds });
    return Promise.resolve();
  }

  recordOutcomes(request: {
    tenantId: string;
    outcomes: readonly DeliveryOutcome[];
  }): Promise<{ recorded: number }> {
    this.log.push({ op: 'recordOutcomes', tenantId: request.tenantId });
    this.recorded.push(...request.outcomes);
    return Promise.resolve({ recorded: request.outcomes.length });
  }

  tenantConnection(tenantId: string): TenantConnection {
    const connection = new FakeTenantConnection(this, tenantId);
    this.connections.push(connection);
    return connection;
  }

  dataSource(): DataSource {
    return {} as DataSource;
  }

  /** The operations named `op`, in order. */
  ops(op: string): { op: string; tenantId?: string; request?: unknown }[] {
    return this.log.filter((entry) => entry.op === op);
  }
}

/** Nothing claimed. */
export const NOTHING_CLAIMED: ClaimAnswer = {
  fresh: { deliveries: [], events: 0, lost: 0 },
  due: [],
  fallback: null,
};

/** A tenant's connection of a `FakeStore`. */
export class FakeTenantConnection implements TenantConnection {
  inTransaction = false;
  released = false;
  readonly runner = {} as QueryRunner;

  constructor(
    private readonly store: FakeStore,
    readonly tenantId: string,
  ) {}

  claim(request: ClaimRequest): Promise<ClaimAnswer> {
    this.store.log.push({ op: 'claim', tenantId: this.tenantId, request: { ...request } });
    const answer = this.store.claims.shift() ?? NOTHING_CLAIMED;
    if (answer instanceof Error) return Promise.reject(answer);
    this.inTransaction = request.beginBatch;
    return Promise.resolve(answer);
  }

  beginBatch(): Promise<void> {
    // as the store's: begun by the claim already
    if (this.inTransaction) return Promise.resolve();
    this.store.log.push({ op: 'beginBatch', tenantId: this.tenantId });
    this.inTransaction = true;
    return Promise.resolve();
  }

  commitBatch(closing: BatchClosing): Promise<{ released: number }> {
    this.store.log.push({ op: 'commitBatch', tenantId: this.tenantId, request: closing });
    this.inTransaction = false;
    const failure = this.store.commitFails?.(closing) ?? null;
    if (failure) return Promise.reject(failure);
    const done = (): { released: number } => {
      this.store.committed.push(...closing.outcomes);
      return { released: 0 };
    };
    const held = this.store.commitHeld?.(this.tenantId) ?? null;
    return held ? held.then(done) : Promise.resolve(done());
  }

  recordOutcomes(request: { outcomes: readonly DeliveryOutcome[] }): Promise<{ recorded: number }> {
    this.store.log.push({ op: 'recordOutcomes', tenantId: this.tenantId, request: 'on its connection' });
    this.store.recorded.push(...request.outcomes);
    this.inTransaction = false;
    return Promise.resolve({ recorded: request.outcomes.length });
  }

  extendEventLeases(request: { eventIds: readonly string[] }): Promise<void> {
    this.store.log.push({ op: 'extendEventLeases', tenantId: this.tenantId, request: request.eventIds });
    return Promise.resolve();
  }

  rollback(): Promise<void> {
    if (this.inTransaction) this.store.log.push({ op: 'rollback', tenantId: this.tenantId });
    this.inTransaction = false;
    return Promise.resolve();
  }

  release(): Promise<void> {
    if (this.released) return Promise.resolve();
    this.store.log.push({ op: 'release', tenantId: this.tenantId });
    this.inTransaction = false;
    this.released = true;
    return Promise.resolve();
  }

  handlerChannel(leaseToken: string): HandlerChannel {
    return {
      tenantSetting: 'app.tenant_id',
      tenantId: this.tenantId,
      marker: leaseToken,
      restore: () => [],
      takePending: () => [],
      seal: { text: 'select 1', values: [] },
      wire: () => Promise.reject(new Error('the fake store has no connection for handlers')),
      cancelRunning: () => Promise.resolve(),
      bounded: (work) => work(),
    };
  }
}

/** A clock that moves only when the spec says so. */
export class FakeClock implements Clock {
  constructor(private at = 1_000_000) {}

  now(): number {
    return this.at;
  }

  advance(ms: number): void {
    this.at += ms;
  }
}

/** A consumer for unit specs: an in-process handler unless `kind` says otherwise. */
export function fakeConsumer(name: string, extra: Partial<OutboxConsumer> = {}): OutboxConsumer {
  return {
    name,
    kind: 'handler',
    eventName: 'thing.happened',
    eventNames: ['thing.happened'],
    hostClass: class Host {},
    methodName: 'handle',
    maxAttempts: 3,
    timeoutMs: 5_000,
    backoff: { baseMs: 1_000, capMs: 60_000, jitter: 0 },
    handle: () => undefined,
    ...extra,
  };
}

/** A claimed delivery of event `eventId` for `consumerName` (a delivery row, unless `deliveryId` is null). */
export function fakeDelivery(
  tenantId: string,
  consumerName: string,
  eventId: string,
  extra: Partial<ClaimedDelivery> = {},
): ClaimedDelivery {
  return {
    deliveryId: `d-${eventId}-${consumerName}`,
    consumerName,
    attempt: 1,
    recovered: false,
    eventId,
    tenantId,
    event: {
      eventId,
      eventName: 'thing.happened',
      tenantId,
      aggregateType: null,
      aggregateId: null,
      occurredAt: new Date(0),
      correlationId: null,
      schemaVersion: 1,
      data: {},
    },
    ...extra,
  };
}

/** A claim's answer: `deliveries` of `events` new events (and `due` ones). */
export function claimAnswer(
  deliveries: ClaimedDelivery[],
  events = new Set(deliveries.map((d) => d.eventId)).size,
  extra: Partial<ClaimAnswer> = {},
): ClaimAnswer {
  return { fresh: { deliveries, events, lost: 0 }, due: [], fallback: null, ...extra };
}
