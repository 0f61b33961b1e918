import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import { OutboxConsumerRegistry } from '../registry/outbox-consumer.registry';
import type { OutboxConsumer } from '../registry/outbox-consumer';
import { InProcessDispatcher } from '../delivery/in-process.dispatcher';
import { ExternalDispatcher } from '../delivery/external.dispatcher';
import { errorText, failed, outcomeTarget } from '../delivery/delivery-outcome';
import {
  fromFanOut,
  toClaimedDelivery,
  type ClaimedDelivery,
  type ClaimedRow,
  type FanOutRow,
} from '../delivery/claimed-delivery';
import { OutboxStore, type RoundConnection } from '../store/outbox.store';
import * as q from '../store/outbox.queries';
import { LeaseVacuum } from '../maintenance/lease-vacuum';
import { addRound, emptyRound, type RelayRoundResult } from './relay-round';
import { sqlState } from '../errors/sql-state';
import { OutboxInstrumentation } from '../observability/outbox-instrumentation';

/** A claimed delivery with the consumer that will take it. */
interface Assigned {
  delivery: ClaimedDelivery;
  consumer: OutboxConsumer;
}

/**
 * Delivers committed events to the consumers this app hosts, tenant by tenant. Runs on an interval registered
 * in the app's `SchedulerRegistry` when `relay.enabled`; `runOnce()` and `drain()` drive it by hand.
 *
 * A round, per tenant with due work: (1) a short transaction claims a batch — due retries, expired leases and
 * new events fanned out to delivery rows — with a lease, and commits; in the same round trip (2) the batch
 * transaction begins, in which in-process handlers run, each with a lazily opened savepoint; inbox rows and
 * outcomes are written in one statement, fenced by the lease token, sent with the commit — a lease taken over
 * meanwhile rolls the whole batch back, so a handler's writes never land twice; (3) external deliveries
 * (webhooks) run with no transaction open, and their outcomes are recorded in a short transaction fenced by the
 * lease token. Two round trips per batch, whatever its size, besides the handlers' own queries; a batch's
 * commit overlaps the claim of the next one.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxRelay.name);
  /** This instance's id in the persisted registry. */
  readonly instanceId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly intervalName = `outbox-relay:${this.instanceId}`;
  private round: Promise<RoundRun> | null = null;
  /** The last batch commit sent without waiting for it (see `runLocal`); at most one is in flight. */
  private finishing: Promise<void> | null = null;
  /** Batch commits sent and not done yet. */
  private committing = 0;
  /** Work the relay does not wait for in the round (commits, releases); stop() waits for it. */
  private readonly background = new Set<Promise<void>>();
  private ticking = false;
  private wakeRequested = false;
  private stopping: Promise<void> | null = null;
  private scheduled = false;
  private lastHeartbeat = 0;
  private lastTenant: string | null = null;
  /** Tenants known to have new events (woken with their id, or their last batch came back full). */
  private readonly hinted = new Set<string>();
  /** When the last `outbox_due_tenants` scan ran, and whether it listed every due tenant. */
  private lastScan = { at: 0, complete: false };
  private lastRoundEndedAt: Date | null = null;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStore,
    private readonly inProcess: InProcessDispatcher,
    private readonly external: ExternalDispatcher,
    private readonly leaseVacuum: LeaseVacuum,
    private readonly moduleRef: ModuleRef,
    private readonly instrumentation: OutboxInstrumentation,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.relay.enabled) return;
    await this.heartbeat();
    this.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  /** When the last round finished (successfully or not), or null before the first one. */
  get lastRoundAt(): Date | null {
    return this.lastRoundEndedAt;
  }

  /** True while the relay's interval is registered and it has not been stopped. */
  get isRunning(): boolean {
    return this.scheduled && !this.stopping;
  }

  /** Starts polling (done at bootstrap when `relay.enabled`). */
  start(): void {
    if (this.scheduled || this.stopping) return;
    const scheduler = this.moduleRef.get(SchedulerRegistry, { strict: false });
    scheduler.addInterval(
      this.intervalName,
      setInterval(() => void this.tick(), this.options.relay.pollIntervalMs),
    );
    this.scheduled = true;
    this.logger.log(
      `relay ${this.instanceId} started: every ${this.options.relay.pollIntervalMs} ms, batches of ${this.options.relay.batchSize}`,
    );
  }

  /**
   * Asks for a round as soon as possible (coalesced: many calls while a round runs make one more round). With
   * the tenants that have new events, the round may go to them straight away, without looking for due tenants
   * (see `processRound`).
   */
  wake(tenants?: Iterable<string>): void {
    if (!this.scheduled || this.stopping) return;
    for (const tenant of tenants ?? []) if (UUID.test(tenant)) this.hinted.add(tenant.toLowerCase());
    this.wakeRequested = true;
    if (!this.ticking) setImmediate(() => void this.tick());
  }

  /**
   * Records in the persisted registry that this instance hosts its consumers, so fan-out (on any instance)
   * creates their delivery rows. Done at bootstrap, then before a round once `registry.heartbeatMs` passed.
   */
  async heartbeat(): Promise<void> {
    const consumers = this.registry.consumers();
    if (consumers.length > 0) await this.store.query(q.heartbeatConsumers(this.instanceId, consumers));
    this.lastHeartbeat = Date.now();
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
    const run = await this.runRound(false);
    await run.settled;
    await this.finishing;
    return sum(run.results);
  }

  /**
   * Runs rounds until one finds nothing due; returns the totals once every outcome is recorded. Retries
   * scheduled for later are not waited for. Rounds overlap: each batch's outcomes are committed while the next
   * batch is claimed.
   */
  async drain(): Promise<RelayRoundResult> {
    const results: RelayRoundResult[] = [];
    const settled: Promise<void>[] = [];
    for (;;) {
      const run = await this.runRound(true);
      results.push(...run.results);
      settled.push(run.settled);
      if (!(await this.mayHaveMore(run, true))) break;
    }
    await Promise.all(settled);
    return sum(results);
  }

  /** One scheduled tick: keeps going while rounds find work. Never throws; a tick already in flight wins. */
  private async tick(): Promise<void> {
    if (this.ticking || this.stopping) return;
    this.ticking = true;
    try {
      let busy = true;
      while (busy && !this.stopping) {
        this.wakeRequested = false;
        const run = await this.runRound(true);
        // A commit can make more due only for ordered consumers here: an event a handler enqueued wakes the relay
        // when its commit is done (see OutboxWakeup). Without them, a round whose batches all came back short
        // found everything there was: what commits later wakes the relay, and the poll finds the rest (another
        // round now would scan and claim again, for nothing, while the next wake-up waits).
        const ordered = this.registry.hasOrdered();
        busy = (ordered || run.full ? await this.mayHaveMore(run, ordered) : false) || this.wakeRequested;
      }
    } catch (error) {
      this.logger.error(`relay round failed; will retry on the next tick: ${errorText(error)}`);
    } finally {
      this.ticking = false;
    }
  }

  /** Runs `work` without holding the round up: never rejects (logs), and `stop()` waits for it. */
  private inBackground(work: Promise<unknown>): Promise<void> {
    const tracked: Promise<void> = work
      .then(() => undefined)
      .catch((error: unknown) => this.logger.error(`relay background work failed: ${errorText(error)}`))
      .finally(() => this.background.delete(tracked));
    this.background.add(tracked);
    return tracked;
  }

  /**
   * Whether another round may find work: this one claimed something, or — when `commitsMayAddWork` — it found
   * nothing while a batch commit was still in flight: that commit may make more due (the next event of an
   * ordered aggregate, an event a handler enqueued), so it is waited for and one more round looks.
   */
  private async mayHaveMore(run: RoundRun, commitsMayAddWork: boolean): Promise<boolean> {
    if (run.results.some((r) => r.deliveriesClaimed > 0 || r.eventsClaimed > 0)) return true;
    if (!commitsMayAddWork || !run.committingAtStart) return false;
    await this.finishing;
    return true;
  }

  /**
   * One round, never two at once. With `overlap`, the round returns once its last batch commit is sent, and
   * `settled` says when that commit is done; the counts of its results are final only then.
   */
  private async runRound(overlap: boolean): Promise<RoundRun> {
    while (this.round) await this.round.catch(() => undefined);
    if (this.stopping)
      return { results: [], settled: Promise.resolve(), committingAtStart: false, full: false };
    this.round = this.processRound(overlap, this.committing > 0);
    const startedAt = performance.now();
    let tenants = 0;
    try {
      const run = await this.round;
      tenants = run.results.length;
      return run;
    } finally {
      this.round = null;
      this.lastRoundEndedAt = new Date();
      // instrumentation: round duration
      this.instrumentation.roundEnded({ durationMs: performance.now() - startedAt, tenants });
    }
  }

  private async stopNow(): Promise<void> {
    const scheduler = this.scheduled ? this.moduleRef.get(SchedulerRegistry, { strict: false }) : null;
    // @nestjs/schedule deletes every interval at shutdown, ours included: check before deleting.
    if (scheduler?.doesExist('interval', this.intervalName)) scheduler.deleteInterval(this.intervalName);
    this.scheduled = false;
    if (this.round) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), this.options.relay.shutdownTimeoutMs);
      });
      const outcome = await Promise.race([
        this.round.then(
          () => 'done' as const,
          () => 'done' as const,
        ),
        timedOut,
      ]);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        this.logger.warn(
          `a relay round was still running after ${this.options.relay.shutdownTimeoutMs} ms; its leases will expire and another relay will take them over`,
        );
      }
    }
    // background work may start more of it (a commit, then a vacuum of the lease table)
    while (this.background.size > 0) await Promise.all(this.background);
    if (this.lastHeartbeat > 0) {
      await this.store
        .query(q.forgetInstance(this.instanceId))
        .catch((error) => this.logger.warn(`could not leave the registry: ${errorText(error)}`));
    }
  }

  private async processRound(overlap: boolean, committingAtStart: boolean): Promise<RoundRun> {
    if (Date.now() - this.lastHeartbeat >= this.options.registry.heartbeatMs) await this.heartbeat();
    const { maxTenantsPerRound, batchSize } = this.options.relay;
    const results: RelayRoundResult[] = [];
    const settled: Promise<void>[] = [];
    let full = false;
    const visit = async (tenants: readonly DueTenant[]): Promise<void> => {
      for (const due of tenants) {
        if (this.stopping) return;
        const run = await this.processTenant(due, overlap);
        // A full batch: more is waiting, the next round can come straight back here.
        if (run.result.eventsClaimed >= batchSize) this.hinted.add(due.tenant_id);
        if (run.result.eventsClaimed >= batchSize || run.result.deliveriesClaimed >= batchSize) full = true;
        results.push(run.result);
        settled.push(run.settled);
      }
    };
    if (this.options.relay.tenants) {
      const supplied = await this.suppliedTenants();
      this.hinted.clear();
      await visit(supplied.map((tenant_id) => ({ tenant_id, has_new: true, has_due: true })));
    } else {
      // The tenants that wake-ups named (or whose last batch came back full) first: a round that also scans for
      // due tenants does so after them, so a wake-up never waits for the scan. Scans come when the last one is
      // older than FULL_SCAN_EVERY_MS or did not list every due tenant, and whenever no tenant was named: while
      // rounds keep coming, no tenant waits longer than that for a scan to find it (between rounds, the poll is
      // the bound). Too many named tenants for one round: the scan takes them in turn with the others.
      const hinted = this.hinted.size <= maxTenantsPerRound ? [...this.hinted] : [];
      this.hinted.clear();
      await visit(hinted.map((tenant_id) => ({ tenant_id, has_new: true, has_due: false })));
      if (!this.stopping && (hinted.length === 0 || !this.scanIsFresh())) {
        const scanned = await this.store.query<DueTenant>(q.dueTenants(maxTenantsPerRound, this.lastTenant));
        this.lastScan = { at: Date.now(), complete: scanned.length < maxTenantsPerRound };
        // With more due tenants than one round visits, the next round starts after the last one visited.
        this.lastTenant =
          scanned.length === maxTenantsPerRound ? scanned[scanned.length - 1]!.tenant_id : null;
        if (this.lastTenant !== null) full = true;
        // a tenant visited above for its new events is visited again only for the retries the scan says are due
        const visited = new Set(hinted);
        await visit(
          scanned
            .filter((due) => !visited.has(due.tenant_id) || due.has_due)
            .map((due) => (visited.has(due.tenant_id) ? { ...due, has_new: false } : due)),
        );
      }
    }
    return { results, settled: Promise.all(settled).then(() => undefined), committingAtStart, full };
  }

  private async processTenant(
    { tenant_id: tenantId, has_new: hasNew, has_due: hasDue }: DueTenant,
    overlap: boolean,
  ): Promise<{ result: RelayRoundResult; settled: Promise<void> }> {
    const result = { ...emptyRound(), tenants: 1 };
    const leaseToken = randomUUID();
    const tenantConsumers = await this.registry.tenantConsumers(tenantId);
    const scoped = new Map(tenantConsumers.map((c) => [c.name, c]));
    const consumerNamed = (name: string): OutboxConsumer | undefined =>
      this.registry.get(name) ?? scoped.get(name);
    const connection = this.store.round();
    let settled = Promise.resolve();
    // once the local batch takes the connection over, its commit releases it
    let handedOver = false;
    try {
      const { claimed, events } = await this.claim(
        connection,
        { tenantId, hasNew, hasDue },
        tenantConsumers,
        leaseToken,
      );
      result.eventsClaimed = events;
      result.deliveriesClaimed = claimed.length;
      // instrumentation: batch size, lease recoveries
      this.instrumentation.batchClaimed({ tenantId, events, deliveries: claimed });
      if (claimed.length === 0) {
        // Nothing to do: the (empty) batch transaction is rolled back without holding the round up.
        handedOver = true;
        settled = this.inBackground(connection.release());
        return { result, settled };
      }

      const local: Assigned[] = [];
      const remote: Assigned[] = [];
      const unclaimed: q.DeliveryOutcome[] = [];
      for (const delivery of claimed) {
        const consumer = consumerNamed(delivery.consumerName);
        if (!consumer) {
          // Claimed for a tenant-scoped consumer removed in between: give the attempt back; it waits as pending.
          unclaimed.push({
            ...outcomeTarget(delivery),
            status: 'deferred',
            errorCode: 'consumerUnavailable',
            error: `consumer ${delivery.consumerName} is not available on this instance`,
            retryInMs: this.options.relay.leaseMs,
          });
        } else if (delivery.recovered && delivery.attempt > consumer.maxAttempts) {
          // Attempts kept starting and never finishing: the process likely dies on this event. Stop here.
          const poisoned = failed(delivery, consumer, 'staleLeaseRecovered', poisonMessage(delivery), {
            dead: true,
          });
          unclaimed.push(poisoned);
          // instrumentation: an attempt that ends before it starts
          this.instrumentation.attemptStarted(delivery, consumer)?.ended?.(poisoned);
        } else {
          (consumer.kind === 'handler' ? local : remote).push({ delivery, consumer });
        }
      }
      // Outcomes settled without a handler go with the local batch when there is one: an event's lease is released
      // only once every one of its in-process pairs is recorded, and pairs of one event may be split between lists.
      if (local.length > 0) {
        handedOver = true;
        ({ settled } = await this.runLocal(
          connection,
          tenantId,
          local,
          leaseToken,
          result,
          unclaimed,
          overlap,
        ));
      } else {
        if (unclaimed.length > 0) await this.record(tenantId, unclaimed, leaseToken, result, connection);
        // No transaction stays open, and no connection is held, across network I/O.
        await connection.release();
      }
      if (remote.length > 0)
        await this.record(
          tenantId,
          await this.sendExternal(tenantId, remote, leaseToken),
          leaseToken,
          result,
        );
      return { result, settled };
    } finally {
      if (!handedOver) await connection.release();
    }
  }

  /**
   * The claim: one transaction, one round trip, which also begins the batch transaction when in-process handlers
   * may have work. Fan-out first: the due-claim in the same transaction then takes the new rows of ordered
   * consumers.
   */
  private async claim(
    connection: RoundConnection,
    { tenantId, hasNew, hasDue }: { tenantId: string; hasNew: boolean; hasDue: boolean },
    tenantConsumers: readonly OutboxConsumer[],
    leaseToken: string,
  ): Promise<{ claimed: ClaimedDelivery[]; events: number }> {
    const { leaseMs, batchSize } = this.options.relay;
    const hosted =
      tenantConsumers.length === 0
        ? this.registry.names()
        : [...this.registry.names(), ...tenantConsumers.map((c) => c.name)];
    const inProcess = this.registry.inProcessNames();
    const claimDue = hasDue || (hasNew && this.hostsOrdered(tenantConsumers));
    const statements = [
      this.context(tenantId, { durable: false }),
      hasNew
        ? q.fanOutPendingEvents({
            tenantId,
            hosted,
            inProcess,
            tenantConsumers,
            liveWithinMs: this.options.registry.liveWithinMs,
            limit: batchSize,
            leaseToken,
            leaseMs,
          })
        : null,
      claimDue
        ? q.claimDueDeliveries({ tenantId, consumers: hosted, limit: batchSize, leaseToken, leaseMs })
        : null,
    ];
    const opening = inProcess.length > 0 ? [this.context(tenantId)] : null;
    for (let claims = 1; ; claims++) {
      const {
        claimed: [, fanOutRows, dueRows],
      } = await connection.claim(statements, opening);
      const fresh = fromFanOut(fanOutRows as FanOutRow[]);
      const due = (dueRows as (ClaimedRow & { consumer_name: string })[]).map(toClaimedDelivery);
      // A claim whose snapshot predates another relay's claim can lock the events that relay just leased; the
      // lease upsert leaves them to it. When that is all this claim found, claim again, with a fresh snapshot.
      const empty = fresh.deliveries.length === 0 && fresh.events === 0 && due.length === 0;
      if (!empty || fresh.lost === 0 || claims >= MAX_CLAIMS_PER_ROUND) {
        return { claimed: [...fresh.deliveries, ...due], events: fresh.events };
      }
    }
  }

  /** True when the last scan for due tenants listed every one of them, less than FULL_SCAN_EVERY_MS ago. */
  private scanIsFresh(): boolean {
    return this.lastScan.complete && Date.now() - this.lastScan.at < FULL_SCAN_EVERY_MS;
  }

  /** The tenants from `relay.tenants`; ids that are not UUIDs are skipped with a warning. */
  private async suppliedTenants(): Promise<string[]> {
    const tenants = await this.options.relay.tenants!();
    const valid = tenants.filter((tenant) => typeof tenant === 'string' && UUID.test(tenant));
    if (valid.length < tenants.length) {
      this.logger.warn(
        `relay.tenants returned ${tenants.length - valid.length} ids that are not UUIDs; they were skipped`,
      );
    }
    return valid;
  }

  /** True when an ordered consumer is hosted here: its new rows wait as pending for the due-claim. */
  private hostsOrdered(tenantConsumers: readonly OutboxConsumer[]): boolean {
    return this.registry.hasOrdered() || tenantConsumers.some((c) => c.ordered);
  }

  /**
   * In-process handlers: one transaction for the batch (begun with the claim, or now), committed with the
   * statement that records the outcomes — fenced, so a lease lost mid-run rolls the batch back. Takes the
   * connection over: it is released once the commit is done. With `overlap`, returns as soon as the commit is
   * sent (`settled` resolves when it is done), so the next batch can be claimed meanwhile; commits go one at a
   * time, each after the previous one is done.
   */
  private async runLocal(
    connection: RoundConnection,
    tenantId: string,
    assigned: Assigned[],
    leaseToken: string,
    result: RelayRoundResult,
    unclaimed: q.DeliveryOutcome[],
    overlap: boolean,
  ): Promise<{ settled: Promise<void> }> {
    let outcomes: q.DeliveryOutcome[];
    try {
      await connection.begin([this.context(tenantId)]);
      outcomes = [
        ...unclaimed,
        ...(await this.inProcess.dispatch(this.store.dataSource(), connection.runner, assigned)),
      ];
    } catch (error) {
      await connection.release();
      await this.batchFailed(error, tenantId, assigned, leaseToken, result, unclaimed);
      return { settled: Promise.resolve() };
    }
    count(outcomes, result);
    await this.finishing;
    this.committing++;
    const commit = connection
      .commit([q.recordOutcomes(outcomes, leaseToken, { fenced: true })])
      .then(
        ([recorded]) => {
          // the outcome statement says how many event leases it deleted
          const vacuum = this.leaseVacuum.noteReleased((recorded as { released: number }[])[0]!.released);
          if (vacuum) void this.inBackground(vacuum);
        },
        (error: unknown) => this.batchFailed(error, tenantId, assigned, leaseToken, result, unclaimed),
      )
      .finally(() => this.committing--);
    const settled = this.inBackground(commit);
    this.finishing = settled;
    // The connection goes back to the pool once the commit is done, outside `settled`: the next batch's commit
    // waits for this one's, not for the refresh of prepared statements that a release may do.
    void this.inBackground(settled.then(() => connection.release()));
    if (!overlap) await settled;
    // in an object: an async function returning a bare promise would wait for it
    return { settled };
  }

  /**
   * The batch transaction failed (a lease taken over, connection lost, a statement refused): every handler's
   * writes were rolled back, so each claimed delivery counts as a failed attempt, recorded in a fresh transaction
   * (fenced as usual: those whose lease another relay holds now are left to it).
   */
  private async batchFailed(
    error: unknown,
    tenantId: string,
    assigned: Assigned[],
    leaseToken: string,
    result: RelayRoundResult,
    unclaimed: q.DeliveryOutcome[],
  ): Promise<void> {
    if (sqlState(error) === q.LEASE_LOST_SQLSTATE) {
      this.logger.warn(`batch of ${assigned.length} deliveries for tenant ${tenantId}: ${errorText(error)}`);
    } else {
      this.logger.error(
        `batch of ${assigned.length} deliveries for tenant ${tenantId} failed and was rolled back: ${errorText(error)}`,
      );
    }
    Object.assign(result, { succeeded: 0, failed: 0, dead: 0 });
    // instrumentation: the attempts observed as they ended are undone
    this.instrumentation.batchRolledBack({ tenantId, deliveries: assigned.length });
    const outcomes = assigned.map(({ delivery, consumer }) =>
      failed(delivery, consumer, 'batchError', `the batch transaction failed: ${errorText(error)}`),
    );
    await this.record(tenantId, [...unclaimed, ...outcomes], leaseToken, result);
  }

  /**
   * External deliveries run with no transaction open; while they are in flight, their leases are pushed back
   * every third of a lease, so a batch of slow endpoints never outlives its lease and gets sent twice.
   */
  private async sendExternal(
    tenantId: string,
    remote: Assigned[],
    leaseToken: string,
  ): Promise<q.DeliveryOutcome[]> {
    const { leaseMs } = this.options.relay;
    const ids = remote.flatMap((a) => (a.delivery.deliveryId === null ? [] : [a.delivery.deliveryId]));
    const keeper = setInterval(
      () => {
        this.store
          .atomically([this.context(tenantId, { durable: false }), q.extendLeases(ids, leaseToken, leaseMs)])
          .catch((error) =>
            this.logger.warn(
              `could not extend the leases of ${ids.length} deliveries for tenant ${tenantId}: ${errorText(error)}`,
            ),
          );
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    try {
      return await this.external.dispatch(remote);
    } finally {
      clearInterval(keeper);
    }
  }

  /**
   * Records outcomes in a short transaction of their own (or in the round's open transaction), not fenced as a
   * batch: outcomes whose lease another relay took are left out and counted as `leaseLost`. A failure is logged
   * and the leases expire.
   */
  private async record(
    tenantId: string,
    outcomes: q.DeliveryOutcome[],
    leaseToken: string,
    result: RelayRoundResult,
    connection?: RoundConnection,
  ): Promise<void> {
    try {
      const statement = q.recordOutcomes(outcomes, leaseToken);
      const [recorded] = connection?.inTransaction
        ? await connection.commit([statement])
        : (await this.store.atomically([this.context(tenantId), statement])).slice(1);
      count(outcomes, result);
      result.leaseLost += outcomes.length - (recorded as { recorded: number }[])[0]!.recorded;
    } catch (error) {
      this.logger.error(
        `could not record ${outcomes.length} outcomes for tenant ${tenantId}; their leases will expire: ${errorText(error)}`,
      );
    }
  }

  /** Sets the tenant for row-level security and an idle cap, both transaction-local (first in each transaction). */
  private context(tenantId: string, options: { durable?: boolean } = {}): q.SqlStatement {
    return q.setTransactionContext(this.options.tenantSetting, tenantId, this.options.relay.leaseMs, options);
  }
}

/** Claims in a row for one tenant when each found only events other relays had just leased (see `claim`). */
const MAX_CLAIMS_PER_ROUND = 3;

/** Longest time between two scans for due tenants while rounds go by hints (see `processRound`). */
const FULL_SCAN_EVERY_MS = 100;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What a round did, tenant by tenant; its counts are final once `settled` resolves. */
interface RoundRun {
  results: RelayRoundResult[];
  settled: Promise<void>;
  /** A batch commit of an earlier round was in flight when this one began. */
  committingAtStart: boolean;
  /** A batch came back full, or due tenants were left for the next round: more may be waiting now. */
  full: boolean;
}

function sum(results: readonly RelayRoundResult[]): RelayRoundResult {
  return results.reduce(addRound, emptyRound());
}

/** A row of `outbox_due_tenants`. */
interface DueTenant {
  tenant_id: string;
  has_new: boolean;
  has_due: boolean;
}

function count(outcomes: readonly q.DeliveryOutcome[], result: RelayRoundResult): void {
  for (const outcome of outcomes) {
    if (outcome.status === 'delivered') result.succeeded++;
    else if (outcome.status === 'dead') result.dead++;
    else result.failed++;
  }
}

function poisonMessage(delivery: ClaimedDelivery): string {
  return `attempt ${delivery.attempt - 1} started but never finished (its relay died or stalled); dead-lettered as a likely poison event`;
}
