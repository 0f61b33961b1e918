import { Inject, Injectable } from '@nestjs/common';
import type { DataSource } from 'typeorm';
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
import { PgTenantConnection, recordedOf, relayContext } from './pg-tenant-connection';
import type { OutboxStorePort, ScheduledPromotion, TenantConnection } from './outbox-store.port';
import * as q from './sql';

/** pg's own pool size when TypeORM is given none (it passes `poolSize` as `max`, and `extra` over it). */
const PG_DEFAULT_POOL = 10;

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
 * through `OutboxStore` and, for a tenant's visit, a `RoundConnection` (`PgTenantConnection`, pg-tenant-connection.ts).
 */
@Injectable()
export class PgRelayStore implements OutboxStorePort {
  /** This store's claim positions (ADR 1206), or null when the policy has none. */
  private readonly positions: ClaimPositions | null;
  /** This store's floor of the claims (ADR 1207's addendum), or null when the policy has none. */
  private readonly floor: ClaimFloor | null;
  /** Whether the claims' transactions plan without sequential scans (`RelayPolicy.leaseProbesByKey`). */
  private readonly byKey: boolean;

  constructor(
    private readonly store: OutboxStore,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    // required, as by `OutboxStore`, whose round connections' warm-up plans the claims in the context read here
    @Inject(OUTBOX_RELAY_POLICY)
    policy: Pick<RelayPolicy, 'claimPositions' | 'claimFloor' | 'leaseProbesByKey'>,
  ) {
    this.byKey = policy.leaseProbesByKey;
    const p = policy.claimPositions;
    this.positions = p ? new ClaimPositions(p.fullScanMs, p.settleMs, p.startScanMs ?? p.fullScanMs) : null;
    const f = policy.claimFloor;
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

  /**
   * Reads the floor (`outbox_claim_floor`) into `floor`, from the last reading's open floor (every range now and
   * then: `ClaimFloor.from`); a failure leaves the claims without a bound.
   */
  async readFloor(floor: ClaimFloor): Promise<void> {
    try {
      const { openFrom, since, sent } = floor.from(performance.now());
      const [row] = await this.store.relayQuery<FloorReading>(
        q.claimFloorReading(this.options.names, floor.marginMs, openFrom, since),
        'claim',
      );
      floor.record(row!, sent);
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
      this.byKey,
    );
  }
}
