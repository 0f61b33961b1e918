/*
 * One file, on purpose: the relay's lifecycle (start, tick, wake, stop) and the round that ties its parts
 * together. The parts live beside it already — the due-tenant planner, the tenant round, the lanes, the tenant
 * shares, the claim sizer, the scheduled promoter, the registry heartbeat — and what stays here is the order in
 * which a round calls them and the state they share across rounds (the timer, the wake-ups, stopping), which is
 * the liveness argument (ADRs 0802, 0809, 1106). Split further, that order would be argued across files.
 */
import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
  Optional,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OUTBOX_RELAY_POLICY, type RelayPolicy } from '../options/relay-policy';
import { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import { InProcessDispatcher } from '../batch/in-process.dispatcher';
import { ExternalDispatcher } from '../batch/external.dispatcher';
import { errorText } from '../errors/error-text';
import { OutboxStallError } from '../errors/outbox.error';
import type { OutboxRelayStall } from '../model/outbox-relay-stall.interface';
import { OUTBOX_STORE_PORT, type OutboxStorePort } from '../store/outbox-store.port';
import { OUTBOX_CLOCK, systemClock, type Clock } from '../model/clock';
import { LeaseVacuum } from '../maintenance/lease-vacuum';
import { OutboxWakeup } from '../enqueue/outbox-wakeup';
import { ScheduledInterval } from '../maintenance/scheduled-interval';
import { addRound, emptyRound, type RelayRoundResult } from '../model/relay-round';
import { BackgroundWork } from '../batch/background-work';
import { DueTenantPlanner, type DueTenant } from './due-tenant-planner';
import { ExternalBatch } from '../batch/external-batch';
import { LocalBatch } from '../batch/local-batch';
import { OutcomeRecorder } from '../batch/outcome-recorder';
import { RegistryHeartbeat } from './registry-heartbeat';
import { TenantRound } from './tenant-round';
import { LateVisits, laneCount, laneOrder, runLanes, type RelayLane } from './relay-lanes';
import { TenantShares } from './tenant-shares';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import { ScheduledPromoter } from './scheduled-promoter';

/**
 * Delivers committed events to the consumers this app hosts, tenant by tenant. Runs on an interval registered
 * in the app's `SchedulerRegistry` when `relay.enabled`; `runOnce()` and `drain()` drive it by hand. This class
 * is the relay's lifecycle (start, stop, tick, wake, runOnce, drain); its roles are in this folder: the
 * due-tenant planner, the tenant round (claim and routing), the local batch with its commit pipeline, the
 * external batch with its lease keeper, the outcome recorder, the registry heartbeat.
 *
 * A round, per tenant with due work: (1) a short transaction claims a batch — due retries, expired leases and
 * new events fanned out to delivery rows — with a lease, and commits; in the same round trip (2) the batch
 * transaction begins, in which in-process handlers run, each with a lazily opened savepoint; inbox rows and
 * outcomes are written in one statement, fenced by the lease token, sent with the commit — a lease taken over
 * meanwhile rolls the whole batch back, so a handler's writes never land twice; (3) external deliveries
 * (webhooks) run with no transaction open, and their outcomes are recorded in a short transaction fenced by the
 * lease token. Two round trips per batch, whatever its size, besides the handlers' own queries; a batch's
 * commit overlaps the claim of the next one. Batches run side by side on `relay.concurrency` lanes (one tenant
 * per lane, a backlogged tenant on every lane while no other is due): docs/adr/0802-batches-side-by-side.md;
 * shares between tenants: relay/tenant-shares.ts, docs/adr/1106-weighted-fairness-between-tenants.md. Why the
 * rest: docs/adr/0602-claim-commits-with-a-lease-outcome-is-fenced.md and docs/adr/0604-round-trips-per-transaction.md.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxRelay.name);
  /** This instance's id in the persisted registry. */
  readonly instanceId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly interval: ScheduledInterval;
  private round: Promise<RoundRun> | null = null;
  private readonly background = new BackgroundWork();
  private readonly planner: DueTenantPlanner;
  /** Whether rounds share the relay by weight: the policy's `fairShares`, off with a fixed list of tenants. */
  private readonly fair: boolean;
  /** How a round shares the relay between its tenants: order, claim sizes, lanes (`relay.tenantWeights`). */
  private readonly shares: TenantShares;
  /** While a round visits a backlogged tenant beside other lanes: the tenants woken meanwhile. */
  private lateVisits: LateVisits<DueTenant> | null = null;
  private readonly heartbeats: RegistryHeartbeat;
  /** Delayed events: their promotion when due, and the one timer for the next. */
  private readonly promoter: ScheduledPromoter;
  /** Makes one lane: a tenant round and the local batch, with its own commit pipeline, it hands work to. */
  private readonly newLane: () => RelayLane;
  /** The batches worked on at once (`relay.concurrency`), made at the first round: the pool is known then. */
  private lanesMade: RelayLane[] | null = null;
  private ticking = false;
  private wakeRequested = false;
  private stopping: Promise<void> | null = null;
  /** Epoch ms (a Date is made when asked: not one per round). */
  private lastRoundEndedAt: number | null = null;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly registry: OutboxConsumerRegistry,
    @Inject(OUTBOX_STORE_PORT) private readonly store: OutboxStorePort,
    inProcess: InProcessDispatcher,
    external: ExternalDispatcher,
    leaseVacuum: LeaseVacuum,
    moduleRef: ModuleRef,
    private readonly instrumentation: OutboxInstrumentation,
    wakeup: OutboxWakeup,
    @Inject(OUTBOX_RELAY_POLICY) private readonly policy: RelayPolicy,
    @Optional() @Inject(OUTBOX_CLOCK) clock: Clock | null = null,
  ) {
    const time = clock ?? systemClock;
    wakeup.subscribe((tenants) => this.wake(tenants));
    this.interval = new ScheduledInterval(moduleRef, `outbox-relay:${this.instanceId}`);
    this.planner = new DueTenantPlanner(options, store, time, policy.pacedScans);
    // a fixed list of tenants (relay.tenants) counts every listed tenant as due each round: shares would hold a
    // lone busy tenant to its weight while the others are idle, so they are off there (ADR 1106)
    this.fair = policy.fairShares && !options.relay.tenants;
    this.shares = new TenantShares(options.relay, this.fair, time);
    this.heartbeats = new RegistryHeartbeat(this.instanceId, options, registry, store, time);
    this.promoter = new ScheduledPromoter(store, () => this.wake(), {
      coalesceMs: options.relay.scheduledCoalesceMs,
      pollIntervalMs: options.relay.pollIntervalMs,
      hears: () => wakeup.hearing,
    });
    const recorder = new OutcomeRecorder(store);
    this.newLane = () => {
      const local = new LocalBatch(
        store,
        inProcess,
        recorder,
        leaseVacuum,
        this.background,
        instrumentation,
        policy,
      );
      const round = new TenantRound(
        options,
        registry,
        store,
        local,
        new ExternalBatch(options, store, external),
        recorder,
        this.background,
        instrumentation,
        time,
        policy,
      );
      return { round, local, backlogged: false };
    };
  }

  private get lanes(): RelayLane[] {
    this.lanesMade ??= Array.from(
      { length: laneCount(this.policy.lanes, () => this.store.poolSize()) },
      this.newLane,
    );
    return this.lanesMade;
  }

  /** The batch commits in flight, every lane's (resolved when none is). */
  private get finishing(): Promise<unknown> {
    return Promise.all(this.lanes.map((lane) => lane.local.finishing).filter((commit) => commit !== null));
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
    return this.lastRoundEndedAt === null ? null : new Date(this.lastRoundEndedAt);
  }

  /**
   * The latest round trip of this instance's relay (or wake-up listener, or health check) that got no reply from
   * the database within `relay.roundTripTimeoutMs`, or null: `recoveredAt` is null while the database still does
   * not answer. Rounds go on meanwhile, each on a fresh connection, each bounded the same way.
   */
  get stall(): OutboxRelayStall | null {
    return this.store.stall;
  }

  /** True while the relay's interval is registered and it has not been stopped. */
  get isRunning(): boolean {
    return this.interval.isScheduled && !this.stopping;
  }

  /** Starts polling (done at bootstrap when `relay.enabled`). */
  start(): void {
    if (this.interval.isScheduled || this.stopping) return;
    // tick() logs a failed round and never rejects; a poll also looks for due delayed events when wake-ups may
    // not reach this relay, and every RECHECK_POLLS polls (see ScheduledPromoter.requestAtPoll)
    this.interval.schedule(this.options.relay.pollIntervalMs, () => {
      this.promoter.requestAtPoll();
      void this.tick();
    });
    this.logger.log(
      `relay ${this.instanceId} started: every ${this.options.relay.pollIntervalMs} ms, batches of ${this.options.relay.batchSize}, ${this.lanes.length} at once`,
    );
  }

  /**
   * Asks for a round as soon as possible (coalesced: many calls while a round runs make one more round). With
   * the tenants that have new events, the round may go to them straight away, without looking for due tenants
   * (see `DueTenantPlanner`). Naming none, the round also promotes due delayed events (see `ScheduledPromoter`).
   */
  wake(tenants?: Iterable<string>): void {
    const named = [...(tenants ?? [])];
    // runOnce and drain promote too: a delayed event enqueued here is looked for even when the relay is driven by hand
    if (named.length === 0 && !this.stopping) this.promoter.request();
    if (!this.interval.isScheduled || this.stopping) return;
    this.planner.hint(named);
    this.lateVisits?.nudge();
    this.wakeRequested = true;
    if (!this.ticking) setImmediate(() => void this.tick()); // tick() never rejects
  }

  /**
   * Records in the persisted registry that this instance hosts its consumers, so fan-out (on any instance)
   * creates their delivery rows. Done at bootstrap, then before a round once `registry.heartbeatMs` passed.
   */
  heartbeat(): Promise<void> {
    return this.heartbeats.beat();
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
    this.promoter.requestIfScheduled();
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
    this.promoter.requestIfScheduled();
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
        // A commit frees room under a limited consumer's concurrency cap too (a tenant's limited subscription's).
        const commitsMayAddWork = this.registry.hasOrdered() || this.registry.hostsLimited();
        busy =
          (commitsMayAddWork || run.full ? await this.mayHaveMore(run, commitsMayAddWork) : false) ||
          this.wakeRequested;
      }
    } catch (error) {
      // a round trip given up was logged as it was (see RoundTripDeadline)
      if (!(error instanceof OutboxStallError))
        this.logger.error(`relay round failed; will retry on the next tick: ${errorText(error)}`);
    } finally {
      this.ticking = false;
      // a wake-up that came while a round failed is not lost with it: it gets a round of its own (one round per
      // wake-up at most, as when the round succeeds; a database that does not answer costs each a deadline)
      if (this.wakeRequested && !this.stopping) setImmediate(() => void this.tick());
    }
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
    this.round = this.processRound(
      overlap,
      this.lanes.some((lane) => lane.local.isCommitting),
    );
    const startedAt = performance.now();
    let tenants = 0;
    try {
      const run = await this.round;
      if (this.instrumentation.active) tenants = sum(run.results).tenants;
      return run;
    } finally {
      this.round = null;
      this.lastRoundEndedAt = Date.now();
      // instrumentation: round duration (nothing made for it when nobody observes)
      if (this.instrumentation.active)
        this.instrumentation.roundEnded({ durationMs: performance.now() - startedAt, tenants });
    }
  }

  private async stopNow(): Promise<void> {
    this.interval.unschedule();
    this.promoter.stop();
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
    await this.background.settle();
    await this.heartbeats.leave();
  }

  private async processRound(overlap: boolean, committingAtStart: boolean): Promise<RoundRun> {
    // awaited only when due: most rounds neither beat nor promote, and each await is a turn of the event loop
    if (this.heartbeats.isDue) await this.heartbeats.beat();
    if (this.promoter.isRequested) this.planner.hintPromoted(await this.promoter.promoteIfRequested());
    const results: RelayRoundResult[] = [];
    const settled: Promise<void>[] = [];
    let full = false;
    const { lanes } = this;
    // a tenant with a backlog may be visited on several lanes (the same entry each time), and is counted once
    const counted = new Set<DueTenant>();
    // no async function around `runLanes`: without late visits (as at a low rate) it is the visit's own promise
    const visit = (tenants: readonly DueTenant[]): Promise<void> => {
      const visits = this.shares.visits(tenants, lanes.length);
      // with the shares, the lanes still committing a backlogged batch take the backlogged tenant again
      const ordered = this.fair ? laneOrder(lanes, visits) : lanes;
      // a lane with nothing left while another drains a backlog visits the tenants woken meanwhile (ADR 1106)
      if (!this.fair || lanes.length < 2 || !tenants.some((due) => due.backlog))
        return runLanes(ordered, visits, visitOne);
      const backlogged = new Set(tenants.filter((due) => due.backlog).map((due) => due.tenantId));
      const late = new LateVisits(() => {
        const woken = this.planner.takeWoken((tenantId) => backlogged.has(tenantId));
        return woken && this.shares.late(woken);
      });
      this.lateVisits = late;
      return runLanes(ordered, visits, visitOne, late).finally(() => {
        this.lateVisits = null;
      });
    };
    const visitOne = async (lane: RelayLane, due: DueTenant): Promise<void> => {
      if (this.stopping) return;
      lane.backlogged = due.backlog === true;
      const run = await lane.round.visit(due, overlap);
      if (counted.has(due)) run.result.tenants = 0;
      counted.add(due);
      // A full batch: more is waiting, the next round can come straight back here.
      // (of the size it claimed: smaller than batchSize after a claim that outlived its bound)
      if (run.result.eventsClaimed >= run.limit) this.planner.noteFull(due.tenantId);
      if (run.result.eventsClaimed >= run.limit || run.result.deliveriesClaimed >= run.limit) full = true;
      results.push(run.result);
      settled.push(run.settled);
    };
    if (await this.planner.plan(visit, () => this.stopping !== null)) full = true;
    // one visit, as mostly at a low rate: its own promise, not one of all of them
    const all = settled.length === 1 ? settled[0]! : Promise.all(settled).then(() => undefined);
    return { results, settled: all, committingAtStart, full };
  }
}

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
