import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import { OutboxConsumerRegistry } from '../registry/outbox-consumer.registry';
import { InProcessDispatcher, errorText } from '../delivery/in-process.dispatcher';
import { toClaimedDelivery, type ClaimedDelivery, type ClaimedRow } from '../delivery/claimed-delivery';
import { OutboxStore } from '../store/outbox.store';
import * as q from '../store/outbox.queries';
import { backoffDelayMs } from './backoff';
import { addRound, emptyRound, type RelayRoundResult } from './relay-round';

/**
 * Delivers committed events to the consumers this app hosts, tenant by tenant. Runs on an interval registered
 * in the app's `SchedulerRegistry` when `relay.enabled`; `runOnce()` and `drain()` drive it by hand.
 *
 * A round, per tenant with due work: (1) a short transaction claims a batch — due retries, expired leases and
 * new events fanned out to delivery rows — with a lease, and commits; (2) a second transaction locks the
 * deliveries still owned, runs their handlers (savepoint each, opened lazily), writes inbox rows and outcomes
 * in one statement, and commits. A constant number of round trips per batch, whatever its size.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxRelay.name);
  private readonly intervalName = `outbox-relay:${randomUUID()}`;
  private round: Promise<RelayRoundResult> | null = null;
  private ticking = false;
  private wakeRequested = false;
  private stopping: Promise<void> | null = null;
  private scheduled = false;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStore,
    private readonly dispatcher: InProcessDispatcher,
    private readonly moduleRef: ModuleRef,
  ) {}

  onApplicationBootstrap(): void {
    if (this.options.relay.enabled) this.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  /** True while the relay's interval is registered and it has not been stopped. */
  get isRunning(): boolean {
    return this.scheduled && !this.stopping;
  }

  /** Starts polling (done at bootstrap when `relay.enabled`). */
  start(): void {
    if (this.scheduled || this.stopping) return;
    const scheduler = this.moduleRef.get(SchedulerRegistry, { strict: false });
    scheduler.addInterval(this.intervalName, setInterval(() => void this.tick(), this.options.relay.pollIntervalMs));
    this.scheduled = true;
    this.logger.log(`relay started: every ${this.options.relay.pollIntervalMs} ms, batches of ${this.options.relay.batchSize}`);
  }

  /** Asks for a round as soon as possible (coalesced: many calls while a round runs make one more round). */
  wake(): void {
    this.wakeRequested = true;
    if (this.scheduled && !this.stopping) setImmediate(() => void this.tick());
  }

  /**
   * Stops claiming, then waits (up to `relay.shutdownTimeoutMs`) for the round in flight. Safe to call twice:
   * concurrent callers share one promise.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopNow();
    return this.stopping;
  }

  /** Processes one round of due work for every tenant that has some, and says what it did. Never runs two at once. */
  async runOnce(): Promise<RelayRoundResult> {
    while (this.round) await this.round.catch(() => undefined);
    if (this.stopping) return emptyRound();
    this.round = this.processRound();
    try {
      return await this.round;
    } finally {
      this.round = null;
    }
  }

  /** Runs rounds until one finds nothing due; returns the totals. Retries scheduled for later are not waited for. */
  async drain(): Promise<RelayRoundResult> {
    let total = emptyRound();
    for (;;) {
      const result = await this.runOnce();
      total = addRound(total, result);
      if (result.deliveriesClaimed === 0 && result.eventsClaimed === 0) return total;
    }
  }

  /** One scheduled tick: keeps going while rounds find work. Never throws; a tick already in flight wins. */
  private async tick(): Promise<void> {
    if (this.ticking || this.stopping) return;
    this.ticking = true;
    try {
      let busy = true;
      while (busy && !this.stopping) {
        this.wakeRequested = false;
        const result = await this.runOnce();
        busy = result.deliveriesClaimed > 0 || result.eventsClaimed > 0 || this.wakeRequested;
      }
    } catch (error) {
      this.logger.error(`relay round failed; will retry on the next tick: ${errorText(error)}`);
    } finally {
      this.ticking = false;
    }
  }

  private async stopNow(): Promise<void> {
    const scheduler = this.scheduled ? this.moduleRef.get(SchedulerRegistry, { strict: false }) : null;
    // @nestjs/schedule deletes every interval at shutdown, ours included: check before deleting.
    if (scheduler?.doesExist('interval', this.intervalName)) scheduler.deleteInterval(this.intervalName);
    this.scheduled = false;
    if (!this.round) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.relay.shutdownTimeoutMs);
    });
    const outcome = await Promise.race([this.round.then(() => 'done' as const, () => 'done' as const), timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.logger.warn(
        `a relay round was still running after ${this.options.relay.shutdownTimeoutMs} ms; its leases will expire and another relay will take them over`,
      );
    }
  }

  private async processRound(): Promise<RelayRoundResult> {
    const tenants = await this.store.query<{ tenant_id: string }>(q.dueTenants(this.options.relay.maxTenantsPerRound));
    let total = emptyRound();
    for (const { tenant_id: tenantId } of tenants) {
      if (this.stopping) break;
      total = addRound(total, await this.processTenant(tenantId));
    }
    return total;
  }

  private async processTenant(tenantId: string): Promise<RelayRoundResult> {
    const result = { ...emptyRound(), tenants: 1 };
    const consumers = this.registry.consumers();
    const leaseToken = randomUUID();
    const { leaseMs, batchSize } = this.options.relay;
    const context = q.setTransactionContext(this.options.tenantSetting, tenantId, leaseMs);

    const claimed = await this.store.transaction(async (runner) => {
      await this.store.rows(runner, context);
      const names = consumers.map((c) => c.name);
      const retries = await this.store.rows<ClaimedRow>(runner, q.claimDueDeliveries({ tenantId, consumers: names, limit: batchSize, leaseToken, leaseMs }));
      const fresh = await this.store.rows<ClaimedRow>(runner, q.fanOutPendingEvents({ tenantId, consumers, limit: batchSize, leaseToken, leaseMs }));
      result.eventsClaimed = new Set(fresh.map((row) => row.event_id)).size;
      return [...retries, ...fresh].filter(isDeliveryRow).map(toClaimedDelivery);
    });
    result.deliveriesClaimed = claimed.length;
    if (claimed.length === 0) return result;

    try {
      await this.store.transaction(async (runner) => {
        await this.store.rows(runner, context);
        const owned = new Set(
          (await this.store.rows<{ id: string }>(runner, q.lockOwnedDeliveries(claimed.map((d) => d.deliveryId), leaseToken))).map((r) => String(r.id)),
        );
        const mine = claimed.filter((d) => owned.has(d.deliveryId));
        result.leaseLost = claimed.length - mine.length;
        const outcomes = await this.dispatcher.dispatch(this.store.dataSource(), runner, mine, (name) => this.registry.get(name));
        if (outcomes.length > 0) await this.store.rows(runner, q.recordOutcomes(outcomes, leaseToken));
        for (const outcome of outcomes) result[outcome.status === 'delivered' ? 'succeeded' : outcome.status]++;
      });
    } catch (error) {
      // The batch transaction itself failed (connection lost, a statement refused): every handler's writes are
      // rolled back, so record each claimed delivery as a failed attempt in a fresh transaction.
      this.logger.error(`batch of ${claimed.length} deliveries for tenant ${tenantId} failed and was rolled back: ${errorText(error)}`);
      Object.assign(result, { succeeded: 0, failed: 0, dead: 0 });
      await this.recordBatchFailure(tenantId, claimed, leaseToken, errorText(error), result).catch((recordError) =>
        this.logger.error(`could not record the failed batch for tenant ${tenantId}; leases will expire: ${errorText(recordError)}`),
      );
    }
    return result;
  }

  private async recordBatchFailure(
    tenantId: string,
    claimed: readonly ClaimedDelivery[],
    leaseToken: string,
    error: string,
    result: RelayRoundResult,
  ): Promise<void> {
    const outcomes = claimed.map((delivery) => {
      const consumer = this.registry.get(delivery.consumerName);
      const dead = !consumer || delivery.attempt >= consumer.maxAttempts;
      result[dead ? 'dead' : 'failed']++;
      return {
        deliveryId: delivery.deliveryId,
        status: dead ? ('dead' as const) : ('failed' as const),
        errorCode: 'batchError',
        error: `the batch transaction failed: ${error}`,
        retryInMs: consumer && !dead ? backoffDelayMs(delivery.attempt, consumer.backoff) : 0,
      };
    });
    await this.store.transaction(async (runner) => {
      await this.store.rows(runner, q.setTransactionContext(this.options.tenantSetting, tenantId, this.options.relay.leaseMs));
      await this.store.rows(runner, q.recordOutcomes(outcomes, leaseToken));
    });
  }
}

function isDeliveryRow(row: ClaimedRow): row is ClaimedRow & { delivery_id: string } {
  return row.delivery_id !== null;
}
