import { Logger } from '@nestjs/common';
import type { ClaimedDelivery, FanOutReason } from '../model/claimed-delivery';
import type { Clock } from '../model/clock';
import { failed, outcomeTarget } from '../model/delivery-outcome';
import type { DueTenant } from '../model/due-tenant';
import { messages } from '../errors/outbox.messages';
import { sqlState } from '../errors/sql-state';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { RelayPolicy } from '../options/relay-policy';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import type { ClaimRequest, OutboxStorePort, TenantConnection } from '../store/outbox-store.port';
import type { BackgroundWork } from '../batch/background-work';
import { ClaimSizer, type BatchSummary } from './claim-sizer';
import type { ExternalBatch, HeldExternal } from '../batch/external-batch';
import type { LocalBatch } from '../batch/local-batch';
import type { OutcomeRecorder } from '../batch/outcome-recorder';
import type { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import type { RelayRoundResult } from '../model/relay-round';
import {
  newTenantBatch,
  RELAY_LOG_CONTEXT,
  type Assigned,
  type Settled,
  type TenantBatch,
} from '../batch/tenant-batch';

/** SQLSTATE `query_canceled`: a statement ran past its `statement_timeout`. */
const QUERY_CANCELED = '57014';

/** Claims in a row for one tenant when each found only events other relays had just leased (see `claim`). */
const MAX_CLAIMS_PER_ROUND = 3;

/** How long claims go straight to the fan-out after the lean claim found a consumer it cannot take. */
const LEAN_RETRY_MS = 30_000;

/** A tenant's scoped consumers where no source of them was added (see `OutboxConsumerRegistry`). */
const NO_TENANT_CONSUMERS: readonly OutboxConsumer[] = [];

/** No names (a tenant without limited consumers of its own): not an array made per claim. */
const NO_NAMES: readonly string[] = [];

/** What one tenant's visit did: its counts (final once `settled` resolves), and the size its claim took. */
export interface TenantVisit {
  result: RelayRoundResult;
  settled: Promise<void>;
  limit: number;
}

/**
 * One tenant's visit in a round: the claim — one transaction, one round trip, which also begins the batch
 * transaction when in-process handlers may have work — then the routing of what it claimed: in-process
 * deliveries to the local batch, webhooks and brokers to the external batch, deliveries that need no handler
 * recorded at once.
 */
export class TenantRound {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  /** How many events (and due deliveries) each claim takes. */
  private readonly sizer: ClaimSizer;
  /** Until when claims go straight to the fan-out: the lean claim found a consumer of another kind. */
  private leanRefusedUntil = 0;

  constructor(
    private readonly options: ResolvedOutboxOptions,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStorePort,
    private readonly local: LocalBatch,
    private readonly external: ExternalBatch,
    private readonly recorder: OutcomeRecorder,
    private readonly background: BackgroundWork,
    private readonly instrumentation: OutboxInstrumentation,
    private readonly clock: Clock,
    private readonly policy: RelayPolicy,
  ) {
    this.sizer = new ClaimSizer(options.relay, policy.claimGrowth, policy.optimisticBatches);
  }

  async visit(due: DueTenant, overlap: boolean): Promise<TenantVisit> {
    const batch = newTenantBatch(due.tenantId);
    const { result } = batch;
    // tenant-scoped consumers (webhook subscriptions): none without a source of them (no wait then), none for
    // most tenants, and no map made then
    const tenantConsumers = this.registry.hasTenantSources
      ? await this.registry.tenantConsumers(batch.tenantId)
      : NO_TENANT_CONSUMERS;
    const scoped = tenantConsumers.length === 0 ? null : new Map(tenantConsumers.map((c) => [c.name, c]));
    const connection = this.store.tenantConnection(batch.tenantId);
    // made where the visit has nothing in flight: a batch's visit returns its commit's promise (issue 35)
    let settled: Promise<void> | null = null;
    // once the local batch takes the connection over, its commit releases it
    let handedOver = false;
    const began = this.clock.now();
    let ran: BatchSummary | null = null;
    let held: HeldExternal | null = null;
    try {
      const { claimed, events, limit, full, fanOut } = await this.claim(
        connection,
        batch,
        due,
        tenantConsumers,
      );
      result.eventsClaimed = events;
      result.deliveriesClaimed = claimed.length;
      // instrumentation: batch size, lease recoveries, fan-outs (nothing made for it when nobody observes)
      if (this.instrumentation.active)
        this.instrumentation.batchClaimed({ tenantId: batch.tenantId, events, deliveries: claimed, fanOut });
      if (claimed.length === 0) {
        // Nothing to do: the (empty) batch transaction is rolled back without holding the round up.
        handedOver = true;
        settled = this.background.track(connection.release());
        return { result, settled, limit };
      }

      const local: Assigned[] = [];
      const external: Assigned[] = [];
      const unclaimed: Settled[] = [];
      // by index: no iterator per visit (an async function's loop keeps it)
      for (let at = 0; at < claimed.length; at++) {
        const delivery = claimed[at]!;
        // (no closure made per visit for it)
        const consumer = this.registry.get(delivery.consumerName) ?? scoped?.get(delivery.consumerName);
        if (!consumer) {
          // Claimed for a tenant-scoped consumer removed in between: give the attempt back; it waits as pending.
          unclaimed.push({
            delivery,
            outcome: {
              ...outcomeTarget(delivery),
              status: 'deferred',
              errorCode: 'consumerUnavailable',
              error: `consumer ${delivery.consumerName} is not available on this instance`,
              retryInMs: this.options.relay.leaseMs,
            },
          });
        } else if (delivery.recovered && delivery.attempt > consumer.maxAttempts) {
          // Attempts kept starting and never finishing: the process likely dies on this event. Stop here.
          const poisoned = failed(
            delivery,
            consumer,
            'staleLeaseRecovered',
            messages.likelyPoison(delivery.attempt - 1),
            { dead: true },
          );
          unclaimed.push({ delivery, outcome: poisoned });
          // instrumentation: an attempt that ends before it starts
          this.instrumentation.attemptStarted(delivery, consumer)?.ended?.(poisoned);
        } else {
          (consumer.kind === 'handler' ? local : external).push({ delivery, consumer });
        }
      }
      // their leases kept from now: they wait for the in-process batch of their claim before they are sent
      if (external.length > 0) held = this.external.hold(batch, external);
      // Outcomes settled without a handler go with the local batch when there is one: an event's lease is released
      // only once every one of its in-process pairs is recorded, and pairs of one event may be split between lists.
      let noWrites = true;
      let reran = false;
      if (local.length > 0) {
        handedOver = true;
        ({ settled, noWrites, reran } = await this.local.run(
          connection,
          batch,
          { assigned: local, unclaimed },
          overlap,
        ));
      } else {
        if (unclaimed.length > 0)
          await this.recorder.record(
            batch,
            unclaimed.map((u) => u.outcome),
            connection,
          );
        // No transaction stays open, and no connection is held, across network I/O.
        await connection.release();
      }
      ran = { full, noWrites, reran, external: external.length > 0, ms: this.clock.now() - began };
      if (held) await this.recorder.record(batch, await held.send());
      return { result, settled: settled ?? Promise.resolve(), limit };
    } finally {
      held?.stop();
      // a claim held to the tenant's share does not grow: it starts again from relay.batchSize once alone
      this.sizer.ran(batch.tenantId, due.share === undefined ? ran : null);
      if (!handedOver) await connection.release();
    }
  }

  /**
   * The claim, of the size the sizer says (see `ClaimSizer`) or the tenant's share when that is smaller (see
   * `TenantShares`), made smaller when it outlives its own bound (`relay.leaseMs`). Fan-out first: the due-claim
   * in the same transaction then takes the new rows of ordered consumers.
   */
  private async claim(
    connection: TenantConnection,
    batch: TenantBatch,
    due: DueTenant,
    tenantConsumers: readonly OutboxConsumer[],
  ): Promise<{
    claimed: ClaimedDelivery[];
    events: number;
    limit: number;
    full: boolean;
    fanOut: FanOutReason | null;
  }> {
    const { leaseMs } = this.options.relay;
    for (;;) {
      const limit = Math.min(this.sizer.next(batch.tenantId), due.share ?? Infinity);
      const began = this.clock.now();
      try {
        // its statements' request, then the claims in this async function (not one more around them, issue 35)
        const { request, fanOut: reason } = this.claimRequest(limit, batch, due, tenantConsumers);
        let fanOut = reason;
        for (let claims = 0; ;) {
          const answer = await connection.claim(request);
          if (request.newEvents === 'lean' && answer.fallback) {
            // It claimed nothing: another consumer routes these events (or a fanned-out event waits for recovery).
            // The fan-out, now; after a consumer of another kind, the fan-out only, for a while.
            if (answer.fallback === 'routes') this.leanRefusedUntil = this.clock.now() + LEAN_RETRY_MS;
            request.newEvents = 'fanOut';
            fanOut = answer.fallback;
            continue;
          }
          claims++;
          const { fresh, due: dueRows } = answer;
          // A claim whose snapshot predates another relay's claim can lock the events that relay just leased; the
          // lease upsert leaves them to it. When that is all this claim found, claim again, with a fresh snapshot.
          const empty = fresh.deliveries.length === 0 && fresh.events === 0 && dueRows.length === 0;
          if (!empty || fresh.lost === 0 || claims >= MAX_CLAIMS_PER_ROUND) {
            const full = fresh.events >= limit || dueRows.length >= limit;
            this.sizer.claimed(limit, full, this.clock.now() - began);
            // one list: the fresh deliveries as they are when no due one came with them (mostly, at a low rate)
            const claimed = dueRows.length === 0 ? fresh.deliveries : [...fresh.deliveries, ...dueRows];
            return { claimed, events: fresh.events, limit, full, fanOut };
          }
        }
      } catch (error) {
        // Its own bound (relay.leaseMs) is too short for a claim of this size here: take fewer at a time.
        if (sqlState(error) !== QUERY_CANCELED || !this.sizer.timedOut(batch.tenantId, limit)) throw error;
        this.logger.warn(
          `a claim of ${limit} for tenant ${batch.tenantId} outlived its statement bound (relay.leaseMs = ${leaseMs} ms); claiming ${this.sizer.next(batch.tenantId)} at a time`,
        );
      }
    }
  }

  /** What a claim of `limit` asks (see `claim`), and why its new events are fanned out, if they are. */
  private claimRequest(
    limit: number,
    batch: TenantBatch,
    { hasNew, hasDue }: DueTenant,
    tenantConsumers: readonly OutboxConsumer[],
  ): { request: ClaimRequest; fanOut: FanOutReason | null } {
    const { tenantId, leaseToken } = batch;
    const hosted =
      tenantConsumers.length === 0
        ? this.registry.names()
        : [...this.registry.names(), ...tenantConsumers.map((c) => c.name)];
    const inProcess = this.registry.inProcessNames();
    // (a limited consumer's new rows wait pending too; the next round's due claim takes them, within its room —
    // a limited tenant consumer's, the due claim in the same transaction: the tenant's claims take no lean path)
    const limitedHere =
      tenantConsumers.length === 0
        ? NO_NAMES
        : tenantConsumers.filter((c) => c.limits !== undefined).map((c) => c.name);
    const claimDue = hasDue || (hasNew && (this.hostsOrdered(tenantConsumers) || limitedHere.length > 0));
    // The lean claim where the policy has it and it may apply: new events only, every consumer hosted here
    // in-process (no webhook, broker, transport or tenant-scoped one), none ordered; and not while the registry
    // said otherwise lately.
    const lean =
      this.policy.leanClaim &&
      hasNew &&
      !claimDue &&
      tenantConsumers.length === 0 &&
      inProcess.length === hosted.length &&
      this.clock.now() >= this.leanRefusedUntil;
    let fanOut: FanOutReason | null = null;
    if (hasNew && !lean)
      fanOut = !this.policy.leanClaim
        ? 'policy'
        : hasDue
          ? 'due'
          : claimDue
            ? 'orderedOrLimited'
            : tenantConsumers.length > 0
              ? 'tenantConsumers'
              : inProcess.length !== hosted.length
                ? 'notInProcess'
                : 'refused';
    const request: ClaimRequest = {
      tenantId,
      leaseToken,
      limit,
      newEvents: !hasNew ? null : lean ? 'lean' : 'fanOut',
      due: claimDue,
      hosted,
      inProcess,
      limited:
        limitedHere.length === 0
          ? this.registry.limitedNames()
          : [...this.registry.limitedNames(), ...limitedHere],
      tenantConsumers,
      beginBatch: inProcess.length > 0,
    };
    return { request, fanOut };
  }

  /** True when an ordered consumer is hosted here: its new rows wait as pending for the due-claim. */
  private hostsOrdered(tenantConsumers: readonly OutboxConsumer[]): boolean {
    return this.registry.hasOrdered() || tenantConsumers.some((c) => c.ordered);
  }
}
