import { Inject, Injectable, Optional } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { fromFanOut, toClaimedDelivery, type ClaimedRow, type FanOutResult } from '../model/claimed-delivery';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { DueTenant } from '../model/due-tenant';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type { OutboxRelayStall } from '../model/outbox-relay-stall.interface';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OutboxStore } from './outbox.store';
import { ClaimPositions } from './claim-positions';
import { ClaimFloor, type FloorReading } from './claim-floor';
import { NIL_UUID } from '../model/outbox.constants';
import { OUTBOX_RELAY_POLICY, type RelayPolicy } from '../options/relay-policy';
import { sendCancelRequest } from './cancel-request';
import { pgConnection } from './pipeline';
import type {
  BatchClosing,
  ClaimAnswer,
  ClaimRequest,
  HandlerChannel,
  OutboxStorePort,
  ScheduledPromotion,
  TenantConnection,
} from './outbox-store.port';
import type { RoundConnection } from './round-connection';
import * as q from './sql';

/** pg's own pool size when TypeORM is given none (it passes `poolSize` as `max`, and `extra` over it). */
const PG_DEFAULT_POOL = 10;

/** The fan-out's result when it was not run (no new events). */
const NOTHING_FANNED_OUT: FanOutResult = { deliveries: [], leases: [], written: [], lost: 0 };

/** The due-tenant scan's positions when the relay keeps none: every tenant from its start (as the two-argument form). */
const NO_POSITIONS: q.DuePositions = { tenants: [], seqs: [], server: '', leasesSince: null };

/** A row of `outbox_due_tenants`. */
interface DueTenantRow {
  tenant_id: string;
  has_new: boolean;
  has_due: boolean;
}

/**
 * The relay's store on PostgreSQL (see `OutboxStorePort`): each operation's statements from `store/sql`, sent
 * through `OutboxStore` and, for a tenant's visit, a `RoundConnection`.
 */
@Injectable()
export class PgRelayStore implements OutboxStorePort {
  /** This store's claim positions (ADR 1206), or null when the policy has none. */
  private readonly positions: ClaimPositions | null;
  /** This store's floor of the claims (ADR 1207's addendum), or null when the policy has none. */
  private readonly floor: ClaimFloor | null;

  constructor(
    private readonly store: OutboxStore,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Optional() @Inject(OUTBOX_RELAY_POLICY) policy?: Pick<RelayPolicy, 'claimPositions' | 'claimFloor'>,
  ) {
    const p = policy?.claimPositions;
    this.positions = p ? new ClaimPositions(p.fullScanMs, p.settleMs, p.startScanMs ?? p.fullScanMs) : null;
    const f = policy?.claimFloor;
    this.floor = f ? new ClaimFloor(f.marginMs, f.refreshMs, f.fullScanMs) : null;
  }

  /**
   * The floor of the next claim of `tenantId` (the nil id: none). When a reading is due, it is sent on a pooled
   * connection of its own and not waited for: the claims go on with the bound they have.
   */
  private floorOf(tenantId: string, now: number): string {
    const floor = this.floor;
    if (floor === null) return NIL_UUID;
    if (floor.due(now)) void this.readFloor(floor);
    return floor.of(tenantId, now);
  }

  /** Reads the floor (`outbox_claim_floor`) into `floor`; a failure leaves the claims without a bound. */
  async readFloor(floor: ClaimFloor): Promise<void> {
    try {
      const [row] = await this.store.relayQuery<FloorReading>(
        q.claimFloorReading(this.options.names, floor.marginMs),
        'claim',
      );
      floor.record(row!);
    } catch {
      floor.failed();
    }
  }

  get stall(): OutboxRelayStall | null {
    return this.store.stall;
  }

  poolSize(): number {
    const options = this.store.dataSource().options as { poolSize?: number; extra?: { max?: number } };
    return options.extra?.max ?? options.poolSize ?? PG_DEFAULT_POOL;
  }

  dataSource(): DataSource {
    return this.store.dataSource();
  }

  async dueTenants({ limit, after }: { limit: number; after: string | null }): Promise<DueTenant[]> {
    const sentAt = performance.now();
    const positions = this.positions?.pastSettled(sentAt) ?? null;
    // the claims' floor bounds the scan too, but for its sweeps without it (ClaimFloor.ofScan)
    const floor = this.floor;
    const bound = floor?.ofScan(after, sentAt) ?? NIL_UUID;
    // in a transaction of its own with the relay's bound, not the role's or database's statement_timeout
    const [, rows, clock] = await this.store.atomically(
      [
        q.relayBound(this.options.relay.leaseMs),
        q.dueTenants(
          this.options.names,
          limit,
          after,
          positions ?? (bound === NIL_UUID ? null : NO_POSITIONS),
          bound,
        ),
        ...(positions ? [q.transactionNow()] : []),
      ],
      { trip: 'dueTenantScan', tenantId: null },
    );
    const due = rows as DueTenantRow[];
    if (floor !== null) {
      floor.scanned(
        after,
        due.map((row) => row.tenant_id),
        limit,
      );
      // with a bound, scans that list no tenant make no claim, which would read the floor: a reading due is sent
      // here, not waited for, so that work brought back below the bound lowers it (without one, nothing is skipped)
      if (floor.bounded && floor.due(sentAt)) void this.readFloor(floor);
    }
    const at = (clock as { now: string }[] | undefined)?.[0]?.now;
    if (positions && at) {
      // a scan from the floor that did not list a tenant says nothing of its events below the floor: only a scan
      // without it stands for the tenants' nets (ClaimPositions.credit)
      const listed = after === null && bound === NIL_UUID ? new Set(due.map((row) => row.tenant_id)) : null;
      this.positions?.scanned(positions, at, due.length < limit, sentAt, listed);
    }
    return due.map((row) => ({
      tenantId: row.tenant_id,
      hasNew: row.has_new,
      hasDue: row.has_due,
    }));
  }

  async promoteScheduled({ limit }: { limit: number }): Promise<ScheduledPromotion> {
    const [row] = await this.store.relayQuery<q.PromoteScheduledRow>(
      q.promoteScheduled(this.options.names, limit),
      'promotion',
    );
    return {
      tenantIds: row?.tenant_ids ?? [],
      promoted: row?.promoted ?? 0,
      nextDueInMs: row?.next_due_in_ms ?? null,
    };
  }

  async heartbeat({
    instanceId,
    startedAt,
    consumers,
  }: {
    instanceId: string;
    startedAt: Date | null;
    consumers: readonly OutboxConsumer[];
  }): Promise<{ startedAt: Date; limited: string[] }> {
    // under the relay's own bounds, not the role's or the database's statement_timeout
    const [row] = await this.store.relayQuery<{ started_at: Date; limited: string[] }>(
      q.heartbeatConsumers(
        this.options.names,
        instanceId,
        consumers,
        startedAt,
        this.options.registry.heartbeatMs,
      ),
      'heartbeat',
    );
    return { startedAt: row!.started_at, limited: row!.limited };
  }

  async leaveRegistry({ instanceId }: { instanceId: string }): Promise<void> {
    await this.store.relayQuery(q.forgetInstance(this.options.names, instanceId), 'heartbeat');
  }

  async extendLeases({
    tenantId,
    leaseToken,
    deliveryIds,
  }: {
    tenantId: string;
    leaseToken: string;
    deliveryIds: readonly string[];
  }): Promise<void> {
    await this.store.atomically(
      [
        relayContext(this.options, tenantId, { durable: false }),
        q.extendLeases(this.options.names, deliveryIds, leaseToken, this.options.relay.leaseMs),
      ],
      { trip: 'leaseExtension', tenantId },
    );
  }

  async recordOutcomes({
    tenantId,
    leaseToken,
    outcomes,
  }: {
    tenantId: string;
    leaseToken: string;
    outcomes: readonly DeliveryOutcome[];
  }): Promise<{ recorded: number }> {
    const [, rows] = await this.store.atomically(
      [relayContext(this.options, tenantId), q.recordOutcomes(this.options.names, outcomes, leaseToken)],
      { trip: 'outcome', tenantId },
    );
    return recordedOf(rows);
  }

  tenantConnection(tenantId: string): TenantConnection {
    return new PgTenantConnection(
      this.store.round(tenantId),
      this.options,
      tenantId,
      this.positions,
      (id, now) => this.floorOf(id, now),
    );
  }
}

/** A tenant's visit on a `RoundConnection` (see `TenantConnection`). */
class PgTenantConnection implements TenantConnection {
  constructor(
    private readonly connection: RoundConnection,
    private readonly options: ResolvedOutboxOptions,
    private readonly tenantId: string,
    private readonly positions: ClaimPositions | null,
    private readonly floorOf: (tenantId: string, now: number) => string,
  ) {}

  get inTransaction(): boolean {
    return this.connection.inTransaction;
  }

  get released(): boolean {
    return this.connection.released;
  }

  get runner(): QueryRunner {
    return this.connection.runner;
  }

  async claim(request: ClaimRequest): Promise<ClaimAnswer> {
    const { names, relay, registry } = this.options;
    const { tenantId, leaseToken, limit, hosted, limited } = request;
    const { leaseMs } = relay;
    const liveWithinMs = registry.liveWithinMs;
    // a limited consumer's turn first, in a statement of its own (see lockConsumerLimits)
    const turn = request.due && limited.length > 0;
    const tenantLimits = tenantConsumerLimits(request.tenantConsumers);
    const sentAt = performance.now();
    const from = this.positions?.from(tenantId, sentAt) ?? '-1';
    // since when its recovery of fanned-out events looks at expired leases (by the same tiers as `from`)
    const leasesSince = this.positions?.leasesSince(tenantId, sentAt) ?? null;
    // a full scan of the positions is a full scan of the floor too: an event below the floor may be below the
    // position (ADR 1207's addendum)
    const bound = this.floorOf(tenantId, sentAt);
    const floor = from === '0' ? NIL_UUID : bound;
    const statements = [
      relayContext(this.options, tenantId, { durable: false }),
      q.newEventsStatement(names, { ...request, liveWithinMs, leaseMs, from, floor, leasesSince }),
      turn ? q.lockConsumerLimits(names, { tenantId, consumers: limited, tenantLimits }) : null,
      request.due
        ? q.claimDueDeliveries(names, {
            tenantId,
            consumers: hosted,
            limit,
            leaseToken,
            leaseMs,
            limited,
            tenantLimits,
            floor,
          })
        : null,
    ];
    const opening = request.beginBatch ? [batchContext(this.options, tenantId, leaseToken)] : null;
    const [, fanOutRows, , dueRows] = await this.connection.claim(statements, opening);
    const result = (fanOutRows![0] as FanOutResult | undefined) ?? NOTHING_FANNED_OUT;
    if (result.position)
      this.positions?.record(tenantId, from, result.position, sentAt, performance.now(), leasesSince);
    return {
      fresh: fromFanOut(result),
      due: (dueRows as (ClaimedRow & { consumer_name: string })[]).map(toClaimedDelivery),
      fallback: result.fallback ?? null,
    };
  }

  beginBatch(leaseToken: string): Promise<void> {
    return this.connection.begin([batchContext(this.options, this.tenantId, leaseToken)]);
  }

  async commitBatch(closing: BatchClosing): Promise<{ released: number }> {
    const closed = await this.connection.commit(this.closing(closing));
    // the outcome statement (the last one) says how many event leases it deleted
    const recorded = closed[closed.length - 1] as { released: number }[];
    return { released: recorded[0]!.released };
  }

  /**
   * The closing statements of a batch transaction, sent with its `commit`: guard, the seal lifted (see
   * `sealBatch`), the session reset when the last handlers changed settings (`dirty`), the batch's context, the
   * outcomes (last). With `noWrites` (no handler asked for `context.manager`, the only way to the batch's
   * connection), nothing can have ended the transaction or changed its settings: the batch's context is still
   * pending and goes first in the same round trip (see `RoundConnection.commit`), and the outcomes follow it
   * without the guard.
   */
  private closing({ leaseToken, outcomes, dirty, noWrites }: BatchClosing): q.SqlStatement[] {
    const { names, tenantSetting } = this.options;
    const outcome = q.recordOutcomes(names, outcomes, leaseToken, { fenced: true });
    if (noWrites) return [outcome];
    return [
      ...q.batchGuard(tenantSetting, this.tenantId, leaseToken),
      // the seal goes once the guard found the batch's own transaction: the commit that follows is the relay's
      q.unsealBatch(names, leaseToken),
      ...(dirty ? q.resetSession() : []),
      // the batch's context again, marker included: the fenced outcome is written only where the marker is
      batchContext(this.options, this.tenantId, leaseToken),
      outcome,
    ];
  }

  async recordOutcomes({
    leaseToken,
    outcomes,
  }: {
    leaseToken: string;
    outcomes: readonly DeliveryOutcome[];
  }): Promise<{ recorded: number }> {
    const statement = q.recordOutcomes(this.options.names, outcomes, leaseToken);
    if (this.connection.inTransaction) {
      const [recorded] = await this.connection.commit([statement], 'outcome');
      return recordedOf(recorded!);
    }
    const [, recorded] = await this.connection.atomically([
      relayContext(this.options, this.tenantId),
      statement,
    ]);
    return recordedOf(recorded!);
  }

  async extendEventLeases({
    leaseToken,
    eventIds,
  }: {
    leaseToken: string;
    eventIds: readonly string[];
  }): Promise<void> {
    await this.connection.atomically([
      relayContext(this.options, this.tenantId),
      q.extendEventLeases(this.options.names, eventIds, leaseToken, this.options.relay.leaseMs),
    ]);
  }

  rollback(): Promise<void> {
    return this.connection.rollback();
  }

  release(): Promise<void> {
    return this.connection.release();
  }

  handlerChannel(leaseToken: string): HandlerChannel {
    const { connection } = this;
    return {
      takePending: () => connection.takePending(),
      seal: q.sealBatch(this.options.names, leaseToken),
      wire: () => connection.wire(),
      cancelRunning: async (timeoutMs) => sendCancelRequest(await pgConnection(connection.runner), timeoutMs),
      bounded: (work) => connection.bounded('batch', work),
      tenantSetting: this.options.tenantSetting,
      tenantId: this.tenantId,
      marker: leaseToken,
      restore: () => [...q.resetSession(), batchContext(this.options, this.tenantId, leaseToken)],
    };
  }
}

/** The rows of `recordOutcomes`: how many it recorded. */
function recordedOf(rows: unknown[]): { recorded: number } {
  return { recorded: (rows as { recorded: number }[])[0]!.recorded };
}

/** Sets the tenant for row-level security and an idle cap, both transaction-local (first in each transaction). */
function relayContext(
  options: ResolvedOutboxOptions,
  tenantId: string,
  context: { durable?: boolean } = {},
): q.SqlStatement {
  return q.setTransactionContext(options.tenantSetting, tenantId, options.relay.leaseMs, context);
}

/** The context of a batch transaction, marked with its lease token (see `BATCH_MARKER`). */
function batchContext(options: ResolvedOutboxOptions, tenantId: string, leaseToken: string): q.SqlStatement {
  return q.setTransactionContext(options.tenantSetting, tenantId, options.relay.leaseMs, {
    batch: leaseToken,
  });
}

/** The limits of the tenant's own limited consumers, as the claims take them (see `TenantConsumerLimits`). */
function tenantConsumerLimits(consumers: readonly OutboxConsumer[]): q.TenantConsumerLimits {
  // most tenants have no limited consumers of their own (or none at all): no filtered copy per claim then
  if (!consumers.some((c) => c.limits !== undefined)) return q.NO_TENANT_LIMITS;
  const limited = consumers.filter((c) => c.limits !== undefined);
  return {
    names: limited.map((c) => c.name),
    caps: limited.map((c) => c.limits!.tenantConcurrency),
    rateLimits: limited.map((c) => c.limits!.rateLimit),
    rateIntervalsMs: limited.map((c) => c.limits!.rateIntervalMs),
  };
}
