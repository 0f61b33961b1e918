// Whole for now: split by role (relay/…, store/sql/…) on the branch in wip/core-transport.bundle (issue 20); this
// file goes once that branch is merged.
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
import { OutboxError, OutboxTransactionEndedError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { BatchRun } from '../delivery/in-process.dispatcher';
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
  /** Events (and due deliveries) a claim takes: `relay.batchSize`, less after a claim that timed out. */
  private claimLimit: number;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStore,
    private readonly inProcess: InProcessDispatcher,
    private readonly external: ExternalDispatcher,
    private readonly leaseVacuum: LeaseVacuum,
    private readonly moduleRef: ModuleRef,
    private readonly instrumentation: OutboxInstrumentation,
  ) {
    this.claimLimit = options.relay.batchSize;
  }

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
        // (of the size it claimed: smaller than batchSize after a claim that outlived its bound, see `claim`)
        if (run.result.eventsClaimed >= run.limit) this.hinted.add(due.tenant_id);
        if (run.result.eventsClaimed >= run.limit || run.result.deliveriesClaimed >= run.limit) full = true;
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
  ): Promise<{ result: RelayRoundResult; settled: Promise<void>; limit: number }> {
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
    let claimLimit = this.options.relay.batchSize;
    try {
      const { claimed, events, limit } = await this.claim(
        connection,
        { tenantId, hasNew, hasDue },
        tenantConsumers,
        leaseToken,
      );
      result.eventsClaimed = events;
      result.deliveriesClaimed = claimed.length;
      claimLimit = limit;
      // instrumentation: batch size, lease recoveries
      this.instrumentation.batchClaimed({ tenantId, events, deliveries: claimed });
      if (claimed.length === 0) {
        // Nothing to do: the (empty) batch transaction is rolled back without holding the round up.
        handedOver = true;
        settled = this.inBackground(connection.release());
        return { result, settled, limit: claimLimit };
      }

      const local: Assigned[] = [];
      const remote: Assigned[] = [];
      const unclaimed: Settled[] = [];
      for (const delivery of claimed) {
        const consumer = consumerNamed(delivery.consumerName);
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
          const poisoned = failed(delivery, consumer, 'staleLeaseRecovered', poisonMessage(delivery), {
            dead: true,
          });
          unclaimed.push({ delivery, outcome: poisoned });
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
        if (unclaimed.length > 0)
          await this.record(
            tenantId,
            unclaimed.map((u) => u.outcome),
            leaseToken,
            result,
            connection,
          );
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
      return { result, settled, limit: claimLimit };
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
    due: { tenantId: string; hasNew: boolean; hasDue: boolean },
    tenantConsumers: readonly OutboxConsumer[],
    leaseToken: string,
  ): Promise<{ claimed: ClaimedDelivery[]; events: number; limit: number }> {
    const { leaseMs, batchSize } = this.options.relay;
    for (;;) {
      const limit = this.claimLimit;
      const began = Date.now();
      try {
        const claimed = await this.claimUpTo(limit, connection, due, tenantConsumers, leaseToken);
        // A claim that came back full well within its bound: the next may take more, up to relay.batchSize.
        if (limit < batchSize && claimed.full && Date.now() - began < leaseMs / 4)
          this.claimLimit = Math.min(batchSize, limit * 2);
        return { ...claimed, limit };
      } catch (error) {
        // Its own bound (relay.leaseMs) is too short for a claim of this size here: take fewer at a time.
        if (sqlState(error) !== QUERY_CANCELED || limit === 1) throw error;
        this.claimLimit = Math.max(1, Math.floor(limit / 2));
        this.logger.warn(
          `a claim of ${limit} for tenant ${due.tenantId} outlived its statement bound (relay.leaseMs = ${leaseMs} ms); claiming ${this.claimLimit} at a time`,
        );
      }
    }
  }

  private async claimUpTo(
    limit: number,
    connection: RoundConnection,
    { tenantId, hasNew, hasDue }: { tenantId: string; hasNew: boolean; hasDue: boolean },
    tenantConsumers: readonly OutboxConsumer[],
    leaseToken: string,
  ): Promise<{ claimed: ClaimedDelivery[]; events: number; full: boolean }> {
    const { leaseMs } = this.options.relay;
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
            limit,
            leaseToken,
            leaseMs,
          })
        : null,
      claimDue ? q.claimDueDeliveries({ tenantId, consumers: hosted, limit, leaseToken, leaseMs }) : null,
    ];
    const opening = inProcess.length > 0 ? [this.batchContext(tenantId, leaseToken)] : null;
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
        const full = fresh.events >= limit || due.length >= limit;
        return { claimed: [...fresh.deliveries, ...due], events: fresh.events, full };
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
   * statement that records the outcomes — fenced, so a lease lost mid-run rolls the batch back, and guarded
   * (`batchGuard`), so the outcomes are written only in the batch's own transaction, in its tenant. Takes the
   * connection over: it is released once the commit is done. With `overlap`, returns as soon as the commit is
   * sent (`settled` resolves when it is done), so the next batch can be claimed meanwhile; commits go one at a
   * time, each after the previous one is done. A batch that cannot be committed is narrowed (see `narrow`).
   */
  private async runLocal(
    connection: RoundConnection,
    tenantId: string,
    assigned: Assigned[],
    leaseToken: string,
    result: RelayRoundResult,
    unclaimed: Settled[],
    overlap: boolean,
  ): Promise<{ settled: Promise<void> }> {
    let outcomes: q.DeliveryOutcome[];
    let dirty: boolean;
    try {
      await connection.begin([this.batchContext(tenantId, leaseToken)]);
      const run = await this.inProcess.dispatch(
        this.store.dataSource(),
        connection.runner,
        assigned,
        this.batchRun(tenantId, leaseToken, false),
      );
      if (run.problem) throw run.problem.error;
      outcomes = [...unclaimed.map((u) => u.outcome), ...run.outcomes];
      dirty = run.dirty;
    } catch (error) {
      try {
        await this.batchFailed(error, tenantId, assigned, leaseToken, result, unclaimed, connection, null);
      } finally {
        await connection.release();
      }
      return { settled: Promise.resolve() };
    }
    count(outcomes, result);
    await this.finishing;
    this.committing++;
    const commit = connection
      .commit(this.closing(tenantId, leaseToken, outcomes, dirty))
      .then(
        (closed) => this.noteReleased(closed),
        (error: unknown) =>
          this.batchFailed(error, tenantId, assigned, leaseToken, result, unclaimed, connection, outcomes),
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
   * The closing statements of a batch transaction, sent with its `commit`: guard, the session reset when the
   * last handlers changed settings (`dirty`), the relay's context, the outcomes (last).
   */
  private closing(
    tenantId: string,
    leaseToken: string,
    outcomes: q.DeliveryOutcome[],
    dirty: boolean,
  ): q.SqlStatement[] {
    return [
      q.batchGuard(this.options.tenantSetting, tenantId, leaseToken),
      ...(dirty ? q.resetSession() : []),
      this.context(tenantId),
      q.recordOutcomes(outcomes, leaseToken, { fenced: true }),
    ];
  }

  /** After a batch's commit: the outcome statement (the last one) says how many event leases it deleted. */
  private noteReleased(closed: unknown[][]): void {
    const recorded = closed[closed.length - 1] as { released: number }[];
    const vacuum = this.leaseVacuum.noteReleased(recorded[0]!.released);
    if (vacuum) void this.inBackground(vacuum);
  }

  private batchRun(tenantId: string, leaseToken: string, careful: boolean): BatchRun {
    return {
      tenantSetting: this.options.tenantSetting,
      tenantId,
      marker: leaseToken,
      careful,
      restore: [...q.resetSession(), this.batchContext(tenantId, leaseToken)],
    };
  }

  /**
   * The batch transaction failed (a lease taken over, connection lost, a statement refused, a handler that
   * ended the transaction or changed its tenant): every handler's writes were rolled back. A failure that one
   * delivery may have caused is narrowed to it (see `narrow`); a lost lease or a broken connection fails every
   * claimed delivery, recorded on the batch's own connection (fenced as usual: those whose lease another relay
   * holds now are left to it). `counted`: outcomes already counted in `result`.
   */
  private async batchFailed(
    error: unknown,
    tenantId: string,
    assigned: Assigned[],
    leaseToken: string,
    result: RelayRoundResult,
    unclaimed: Settled[],
    connection: RoundConnection,
    counted: q.DeliveryOutcome[] | null,
  ): Promise<void> {
    if (counted) count(counted, result, -1);
    // a failure before the commit leaves the batch transaction open (aborted, or holding the handlers' writes)
    await connection.rollback();
    // instrumentation: the attempts observed as they ended are undone
    this.instrumentation.batchRolledBack({ tenantId, deliveries: assigned.length });
    if (narrowable(error) && !connection.released) {
      this.logger.warn(
        `batch of ${assigned.length} deliveries for tenant ${tenantId} was rolled back (${errorText(error)}); ` +
          'running it again, in parts, to find the deliveries that caused it',
      );
      await this.narrow(connection, tenantId, byEvent(assigned, unclaimed), leaseToken, result);
      return;
    }
    if (sqlState(error) === q.LEASE_LOST_SQLSTATE) {
      this.logger.warn(`batch of ${assigned.length} deliveries for tenant ${tenantId}: ${errorText(error)}`);
    } else {
      this.logger.error(
        `batch of ${assigned.length} deliveries for tenant ${tenantId} failed and was rolled back: ${errorText(error)}`,
      );
    }
    await this.charge(connection, tenantId, [{ assigned, unclaimed }], leaseToken, result, error, new Map());
  }

  /**
   * Finds the deliveries that made a batch fail, with its leases still held and no attempt charged to the
   * others: the batch's events run again, every handler checked as it returns (careful mode: a deferred
   * constraint violated, the tenant changed, the transaction ended — each fails the handler that did it, alone);
   * a part that still fails is split in two, by event (the in-process pairs of one event are recorded together,
   * with its lease), down to one event, whose deliveries are then charged with the failure. A handler that ended
   * the batch transaction is failed and the part runs again without it. All on the batch's own connection.
   */
  private async narrow(
    connection: RoundConnection,
    tenantId: string,
    groups: EventGroup[],
    leaseToken: string,
    result: RelayRoundResult,
  ): Promise<void> {
    const known = new Map<ClaimedDelivery, q.DeliveryOutcome>();
    const parts: EventGroup[][] = [groups];
    while (parts.length > 0) {
      const part = parts.shift()!;
      const error = await this.runCarefully(connection, tenantId, part, leaseToken, result, known);
      if (error === null) continue;
      if (part.length > 1 && narrowable(error) && !connection.released) {
        const half = Math.ceil(part.length / 2);
        parts.unshift(part.slice(0, half), part.slice(half));
        continue;
      }
      if (sqlState(error) !== q.LEASE_LOST_SQLSTATE) {
        this.logger.error(
          `event ${part[0]!.assigned[0]?.delivery.eventId ?? '(none)'} for tenant ${tenantId} fails its batch on its own: ${errorText(error)}`,
        );
      }
      await this.charge(connection, tenantId, part, leaseToken, result, error, known);
    }
  }

  /**
   * Runs a part of a batch in careful mode and commits it; returns null, or the error that failed it. A handler
   * that ended the transaction is settled as failed in `known`, and the part runs again without it.
   */
  private async runCarefully(
    connection: RoundConnection,
    tenantId: string,
    part: EventGroup[],
    leaseToken: string,
    result: RelayRoundResult,
    known: Map<ClaimedDelivery, q.DeliveryOutcome>,
  ): Promise<unknown> {
    const assigned = part.flatMap((g) => g.assigned);
    const unclaimed = part.flatMap((g) => g.unclaimed.map((u) => u.outcome));
    for (;;) {
      try {
        await connection.begin([this.batchContext(tenantId, leaseToken)]);
        const run = await this.inProcess.dispatch(this.store.dataSource(), connection.runner, assigned, {
          ...this.batchRun(tenantId, leaseToken, true),
          settled: known,
        });
        if (run.problem) {
          const { delivery, consumer } = assigned[run.problem.index]!;
          if (!(run.problem.error instanceof OutboxTransactionEndedError) || known.has(delivery))
            throw run.problem.error;
          known.set(delivery, failed(delivery, consumer, 'transactionControl', run.problem.error.message));
          await connection.rollback();
          continue;
        }
        const outcomes = [...unclaimed, ...run.outcomes];
        this.noteReleased(await connection.commit(this.closing(tenantId, leaseToken, outcomes, run.dirty)));
        count(outcomes, result);
        return null;
      } catch (error) {
        await connection.rollback();
        return error;
      }
    }
  }

  /** Records every delivery of `part` not settled in `known` as failed by `error` (see `batchFailed`). */
  private async charge(
    connection: RoundConnection,
    tenantId: string,
    part: readonly { assigned: Assigned[]; unclaimed: Settled[] }[],
    leaseToken: string,
    result: RelayRoundResult,
    error: unknown,
    known: ReadonlyMap<ClaimedDelivery, q.DeliveryOutcome>,
  ): Promise<void> {
    const text = messages.batchFailed(errorText(error));
    const outcomes = part.flatMap((g) => [
      ...g.unclaimed.map((u) => u.outcome),
      ...g.assigned.map(
        ({ delivery, consumer }) => known.get(delivery) ?? failed(delivery, consumer, 'batchError', text),
      ),
    ]);
    await this.record(tenantId, outcomes, leaseToken, result, connection);
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
   * and the leases expire. With `connection`, on that connection: a round that holds one never asks the pool
   * for a second (with a pool of one, that would wait forever).
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
        : (
            await (connection && !connection.released
              ? connection.atomically([this.context(tenantId), statement])
              : this.store.atomically([this.context(tenantId), statement]))
          ).slice(1);
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

  /** The context of a batch transaction, marked with its lease token (see `BATCH_MARKER`). */
  private batchContext(tenantId: string, leaseToken: string): q.SqlStatement {
    return q.setTransactionContext(this.options.tenantSetting, tenantId, this.options.relay.leaseMs, {
      batch: leaseToken,
    });
  }
}

/** SQLSTATE `query_canceled`: a statement ran past its `statement_timeout`. */
const QUERY_CANCELED = '57014';

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

/** Adds the outcomes to the counts of `result` (`by` -1: takes them back out). */
function count(outcomes: readonly q.DeliveryOutcome[], result: RelayRoundResult, by = 1): void {
  for (const outcome of outcomes) {
    if (outcome.status === 'delivered') result.succeeded += by;
    else if (outcome.status === 'dead') result.dead += by;
    else result.failed += by;
  }
}

/** A claimed delivery settled without a handler (its consumer is gone, or its attempts kept dying). */
interface Settled {
  delivery: ClaimedDelivery;
  outcome: q.DeliveryOutcome;
}

/** The deliveries of one event in a batch: the smallest part whose outcomes can be recorded (see `narrow`). */
interface EventGroup {
  assigned: Assigned[];
  unclaimed: Settled[];
}

/** Groups a batch by event, in the batch's order. */
function byEvent(assigned: readonly Assigned[], unclaimed: readonly Settled[]): EventGroup[] {
  const groups = new Map<string, EventGroup>();
  const group = (eventId: string): EventGroup => {
    let g = groups.get(eventId);
    if (!g) groups.set(eventId, (g = { assigned: [], unclaimed: [] }));
    return g;
  };
  for (const a of assigned) group(a.delivery.eventId).assigned.push(a);
  for (const u of unclaimed) group(u.delivery.eventId).unclaimed.push(u);
  return [...groups.values()];
}

/**
 * Whether a batch's failure may come from one of its deliveries, and running parts of it again may find which:
 * a statement refused by PostgreSQL, or a handler's misdeed found by the relay. Not a lost lease (the batch is
 * another relay's now), nor a connection that broke or a server shutting down (nothing to run it on).
 */
function narrowable(error: unknown): boolean {
  if (error instanceof OutboxError) return true;
  const state = sqlState(error);
  if (state === undefined || state === q.LEASE_LOST_SQLSTATE) return false;
  return !state.startsWith('08') && !state.startsWith('57P');
}

function poisonMessage(delivery: ClaimedDelivery): string {
  return `attempt ${delivery.attempt - 1} started but never finished (its relay died or stalled); dead-lettered as a likely poison event`;
}
