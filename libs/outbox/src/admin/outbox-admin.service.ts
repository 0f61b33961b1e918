// Whole for now (≈485 lines): every operator action is one public method over the same tenant-scoped read/write
// path, with the audit row written in the action's own transaction (`write`, `replay`, `purge` below); splitting
// the subscription and audit actions out would split that path. Their SQL is in store/sql/.
import { BrokerConsumerFactory } from '../brokers/broker-consumer.factory';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { errorText } from '../errors/error-text';
import { sqlState } from '../errors/sql-state';
import { handlerBound } from '../store/sql/transaction-context';
import { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import { OutboxRelay } from '../relay/outbox.relay';
import { BACKFILL_CHUNK_SIZE, BACKFILL_PAUSE_MS, OutboxBackfill } from '../consumers/outbox-backfill';
import { isEventPattern } from '../model/event-pattern';
import { NIL_UUID } from '../model/outbox.constants';
import { OutboxWebhookService } from '../webhooks/outbox-webhook.service';
import { OutboxStore } from '../store/outbox.store';
import * as q from '../store/sql/admin';
import * as pq from '../store/sql/consumer-pauses';
import * as sq from '../store/sql/event-search';
import * as bk from '../store/sql/bulk-actions';
import * as bq from './board-sql';
import * as wq from '../webhooks/webhooks-sql';
import * as iq from '../inbox/inbox-sql';
import { OutboxError } from '../errors/outbox.error';
import { subscriptionConsumerName, WebhookSubscriptionSource } from '../webhooks/webhook-subscription.source';
import type { SqlStatement } from '../store/sql';
import { examineOutbox } from '../maintenance/outbox-doctor';
import { PendingAgeReadings } from '../store/pending-age-readings';
import type { OutboxDoctorReport, OutboxDoctorThresholds } from '../model/outbox-doctor-report.interface';
import {
  BULK_CHUNK_SIZE,
  MAX_PAGE_SIZE,
  checkConsumerName,
  checkDate,
  checkEventName,
  checkInteger,
  checkText,
  checkUuid,
} from './admin-validation';
import type {
  OutboxActionOptions,
  OutboxAuditEntry,
  OutboxBackfillReport,
  OutboxBackfillRequest,
  OutboxBackfillState,
  OutboxBlockedAggregate,
  OutboxBulkFilter,
  OutboxBulkReport,
  OutboxBulkRequest,
  OutboxConsumerCounts,
  OutboxConsumerPause,
  OutboxConsumerPauseScope,
  OutboxDeliveryRecord,
  OutboxDeliveryStatus,
  OutboxEventDeliveries,
  OutboxEventMatch,
  OutboxEventSearch,
  OutboxEventSearchPage,
  OutboxEventStatus,
  OutboxFailedEvent,
  OutboxFailedEventsQuery,
  OutboxFailedFilter,
  OutboxPage,
  OutboxStats,
} from './outbox-admin.interfaces';

const EVENT_STATUSES: readonly OutboxEventStatus[] = [
  'pending',
  'processing',
  'published',
  'failed',
  'no_handlers',
  'scheduled',
];
const DELIVERY_STATUSES: readonly OutboxDeliveryStatus[] = [
  'pending',
  'processing',
  'delivered',
  'failed',
  'dead',
];
const DEFAULT_PAGE_SIZE = 50;
/** How long a search may run: one index range when the search indexes exist, far less than this. */
const SEARCH_TIMEOUT_MS = 3_000;
/** SQLSTATE `query_canceled`: a statement ran past its `statement_timeout`. */
const QUERY_CANCELED = '57014';
/** Blocked aggregates listed by `stats` (all are counted). */
const BLOCKED_AGGREGATES_LISTED = 100;

/**
 * The operator's toolkit: stats, dead letters, delivery history, replay and purge. Every method works on one
 * tenant, in a transaction of its own that sets the tenant for row-level security (transaction-local) and names
 * it in every statement. The connection needs the grants of the `outbox_relay` role.
 */
@Injectable()
export class OutboxAdminService {
  private readonly logger = new Logger(OutboxAdminService.name);
  /** The doctor's backlog reading, from where this instance's last one proved nothing pending below. */
  private readonly pendingAge = new PendingAgeReadings();

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    private readonly registry: OutboxConsumerRegistry,
    private readonly relay: OutboxRelay,
    private readonly backfillRunner: OutboxBackfill,
    // explicit tokens: the emitted type of `X | null` is Object
    @Optional() @Inject(OutboxWebhookService) private readonly webhooks: OutboxWebhookService | null,
    @Optional()
    @Inject(WebhookSubscriptionSource)
    private readonly subscriptions: WebhookSubscriptionSource | null,
    @Optional() @Inject(BrokerConsumerFactory) private readonly brokers: BrokerConsumerFactory | null,
  ) {}

  /**
   * Counts of one tenant: events per status, deliveries per consumer, oldest pending age, orphaned consumers,
   * aggregates blocked by a dead delivery to an ordered consumer.
   */
  async stats(tenantId: string): Promise<OutboxStats> {
    const tenant = checkUuid('tenantId', tenantId);
    const tenantConsumers = (await this.registry.tenantConsumers(tenant)).map((c) => c.name);
    const [[row], inboxRows, pauses] = await this.read(tenant, async (runner) => [
      await this.store.rows<StatsRow>(
        runner,
        q.tenantStats(this.options.names, {
          tenantId: tenant,
          orphanAfterMs: this.options.registry.orphanAfterMs,
          tenantConsumers,
          blockedLimit: BLOCKED_AGGREGATES_LISTED,
        }),
      ),
      await this.store.rows<iq.InboxCountsRow>(runner, iq.inboxCounts(this.options.names, tenant)),
      await this.store.rows<pq.ConsumerPauseRow>(runner, pq.consumerPauses(this.options.names, tenant)),
    ]);
    const events = Object.fromEntries(EVENT_STATUSES.map((s) => [s, row.events[s] ?? 0])) as Record<
      OutboxEventStatus,
      number
    >;
    const consumers: Record<string, OutboxConsumerCounts> = {};
    for (const [name, status, n] of row.deliveries) {
      consumers[name] ??= Object.fromEntries(DELIVERY_STATUSES.map((s) => [s, 0])) as OutboxConsumerCounts;
      consumers[name][status] = n;
    }
    return {
      tenantId: tenant,
      events,
      consumers,
      oldestPendingAgeSeconds:
        row.oldest_pending_age_seconds === null ? null : Math.max(0, row.oldest_pending_age_seconds),
      orphanedConsumers: row.orphaned,
      webhookCircuits: (this.webhooks?.circuitStates() ?? []).filter(
        (c) => c.tenantId === null || c.tenantId === tenant,
      ),
      brokerCircuits: this.brokers?.circuitStates() ?? [],
      blockedAggregates: row.blocked.map(({ seq: _seq, ...blocked }) => blocked),
      blockedAggregateCount: row.blocked_count,
      inbox: Object.fromEntries(
        inboxRows.map((r) => [r.consumer_name, { retrying: r.retrying, dead: r.dead }]),
      ),
      relayStall: this.relay.stall,
      pausedConsumers: pauses.map(toConsumerPause),
      nextDeliveryAt: row.next_delivery_at,
    };
  }

  /** One page of the tenant's failed events (some delivery dead), newest first, with each consumer's last error. */
  async failedEvents(
    tenantId: string,
    query: OutboxFailedEventsQuery = {},
  ): Promise<OutboxPage<OutboxFailedEvent>> {
    const filter = this.failedFilter(tenantId, query);
    const limit = checkInteger('limit', query.limit, 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE);
    const offset = checkInteger('offset', query.offset, 0, null, 0);
    const [row] = await this.read(filter.tenantId, (runner) =>
      this.store.rows<{ total: number; items: FailedEventJson[] }>(
        runner,
        q.failedEventsPage(this.options.names, { ...filter, limit, offset }),
      ),
    );
    return { total: row.total, limit, offset, items: row.items.map(toFailedEvent) };
  }

  /** One event of the tenant with its delivery to each consumer; null when the tenant has no such event. */
  async deliveries(tenantId: string, eventId: string): Promise<OutboxEventDeliveries | null> {
    const tenant = checkUuid('tenantId', tenantId);
    const event = checkUuid('eventId', eventId);
    const [row] = await this.read(tenant, (runner) =>
      this.store.rows<EventDeliveriesRow>(runner, q.eventDeliveries(this.options.names, tenant, event)),
    );
    return row ? toEventDeliveries(row) : null;
  }

  /**
   * Sends one event's dead and failed deliveries (of `consumer` only, when given) back to pending with attempts
   * reset, due now. Delivered deliveries are never re-run; pending and in-flight ones are left alone. Returns how
   * many deliveries were reset.
   */
  async replayEvent(
    tenantId: string,
    eventId: string,
    options: { consumer?: string } & OutboxActionOptions = {},
  ): Promise<number> {
    const tenant = checkUuid('tenantId', tenantId);
    const event = checkUuid('eventId', eventId);
    const consumer = checkConsumerName('consumer', options.consumer);
    return this.replay(
      q.replayDeliveries(this.options.names, { tenantId: tenant, eventId: event, consumer, eventName: null }),
      tenant,
      audited(options, 'replayEvent', { eventId: event, consumer }),
    );
  }

  /** Like `replayEvent`, for every dead or failed delivery of the tenant matching the filter. Returns how many were reset. */
  async replayFailed(
    tenantId: string,
    filter: OutboxFailedFilter = {},
    options: OutboxActionOptions = {},
  ): Promise<number> {
    const checked = this.failedFilter(tenantId, filter);
    return this.replay(
      q.replayDeliveries(this.options.names, { ...checked, eventId: null }),
      checked.tenantId,
      audited(options, 'replayFailed', { consumer: checked.consumer, eventName: checked.eventName }),
    );
  }

  /**
   * Deletes one settled event (failed, published or no_handlers, with no delivery still open) with its delivery
   * and inbox rows, e.g. a dead letter nobody will replay, or personal data to erase. Returns whether it was deleted.
   */
  async purgeEvent(tenantId: string, eventId: string, options: OutboxActionOptions = {}): Promise<boolean> {
    const tenant = checkUuid('tenantId', tenantId);
    const event = checkUuid('eventId', eventId);
    const statement = q.purgeEvents(this.options.names, {
      tenantId: tenant,
      eventId: event,
      consumer: null,
      eventName: null,
      statuses: ['failed', 'published', 'no_handlers'],
    });
    return (await this.purge(statement, tenant, audited(options, 'purgeEvent', { eventId: event }))) === 1;
  }

  /**
   * Deletes the tenant's failed events matching the filter (retention keeps them), with their rows. Events whose
   * other deliveries are still open are skipped until those settle. Returns how many events were deleted.
   */
  async purgeFailed(
    tenantId: string,
    filter: OutboxFailedFilter = {},
    options: OutboxActionOptions = {},
  ): Promise<number> {
    const checked = this.failedFilter(tenantId, filter);
    return this.purge(
      q.purgeEvents(this.options.names, { ...checked, eventId: null, statuses: ['failed'] }),
      checked.tenantId,
      audited(options, 'purgeFailed', { consumer: checked.consumer, eventName: checked.eventName }),
    );
  }

  /**
   * Finds the tenant's events by event id, aggregate (id, with or without its type), correlation id or event name
   * (every field given must match), newest first, a page at a time: pass the page's `nextBeforeId` as `beforeId`
   * for the next. Each search walks one index, whatever the size of the history (docs/board.md#search).
   */
  async searchEvents(tenantId: string, query: OutboxEventSearch): Promise<OutboxEventSearchPage> {
    const search = checkSearch(tenantId, query);
    // one more than the page: whether a next page exists; bounded in time, for a database without the opt-in
    // search indexes, where a rare value means reading the tenant's history
    const rows = await this.read(search.tenantId, async (runner) => {
      await this.store.rows(runner, handlerBound(SEARCH_TIMEOUT_MS));
      return this.store.rows<sq.EventSearchRow>(
        runner,
        sq.searchEvents(this.options.names, { ...search, limit: search.limit + 1 }),
      );
    }).catch((error: unknown) => {
      if (sqlState(error) !== QUERY_CANCELED) throw error;
      const field =
        search.eventName !== null
          ? 'eventName'
          : search.correlationId !== null
            ? 'correlationId'
            : 'aggregateId';
      throw new OutboxValidationError(field, messages.searchTooLong(field, SEARCH_TIMEOUT_MS));
    });
    const items = rows.slice(0, search.limit).map(toEventMatch);
    return { items, nextBeforeId: rows.length > search.limit ? items[items.length - 1]!.eventId : null };
  }

  /**
   * Sends every dead or failed delivery of the tenant matching the filter back to pending, due now, attempts
   * reset, as `replayEvent` does, in chunks of `chunkSize` deliveries (a transaction each, so no giant
   * transaction holds locks against the relay). `dryRun` counts and changes nothing. With `audit`, one audit row
   * (action `replayMatching`, the filter, the deliveries reset), written with the last chunk. Returns how many.
   */
  async replayMatching(
    tenantId: string,
    request: OutboxBulkRequest = {},
    options: OutboxActionOptions = {},
  ): Promise<OutboxBulkReport> {
    const { filter, chunkSize, dryRun } = checkBulk(tenantId, request, 'replay');
    if (dryRun)
      return {
        dryRun,
        count: await this.countMatching(bk.countReplayable(this.options.names, filter)),
        chunks: 0,
      };
    const report = await this.inChunks(
      'replay',
      (afterId) => bk.replayChunk(this.options.names, { ...filter, afterId, chunkSize }),
      filter.tenantId,
      audited(options, 'replayMatching', bulkTarget(filter)),
    );
    if (report.count > 0) this.relay.wake();
    return report;
  }

  /**
   * Deletes every failed event of the tenant matching the filter whose deliveries are all settled, with their
   * rows, as `purgeEvent` does, in chunks of `chunkSize` events. `dryRun` counts and changes nothing. With
   * `audit`, one audit row (action `purgeMatching`, the filter, the events purged), written with the last chunk.
   */
  async purgeMatching(
    tenantId: string,
    request: OutboxBulkRequest = {},
    options: OutboxActionOptions = {},
  ): Promise<OutboxBulkReport> {
    const { filter, chunkSize, dryRun } = checkBulk(tenantId, request, 'purge');
    if (dryRun)
      return {
        dryRun,
        count: await this.countMatching(bk.countPurgeable(this.options.names, filter)),
        chunks: 0,
      };
    return this.inChunks(
      'purge',
      (afterId) => bk.purgeChunk(this.options.names, { ...filter, afterId, chunkSize }),
      filter.tenantId,
      audited(options, 'purgeMatching', bulkTarget(filter)),
    );
  }

  private async countMatching(statement: SqlStatement): Promise<number> {
    const tenantId = statement.values[0] as string;
    const [row] = await this.read(tenantId, (runner) =>
      this.store.rows<{ count: number }>(runner, statement),
    );
    return row!.count;
  }

  /**
   * Runs a bulk action's chunks one after the other, each in a write transaction of its own, until a chunk finds
   * nothing left (not until one comes back short: `for update` with `limit` may return fewer rows than there are).
   * That last, empty chunk writes the audit row with the total, so the row commits with the end of the action.
   */
  private async inChunks(
    action: 'replay' | 'purge',
    chunk: (afterId: string | null) => SqlStatement,
    tenantId: string,
    audit: Audit | null,
  ): Promise<OutboxBulkReport> {
    let afterId: string | null = null;
    let count = 0;
    let chunks = 0;
    try {
      for (;;) {
        const total = count;
        const [row] = await this.write(tenantId, async (runner) => {
          const rows = await this.store.rows<{ done: number; last_id: string | null }>(
            runner,
            chunk(afterId),
          );
          if (rows[0]!.last_id === null && audit)
            await this.store.rows(
              runner,
              bq.insertAudit(this.options.names, { ...audit, tenantId, rows: total }),
            );
          return rows;
        });
        if (row!.last_id === null) break;
        count += row!.done;
        chunks++;
        afterId = row!.last_id;
      }
    } catch (error) {
      this.logger.error(
        `bulk ${action} for tenant ${tenantId} stopped after ${count} rows in ${chunks} chunks ` +
          `(they stay done; the same filter again takes what is left): ${errorText(error)}`,
      );
      throw error;
    }
    if (count > 0)
      this.logger.log(
        `bulk ${action} ${action === 'replay' ? 'reset' : 'purged'} ${count} ` +
          `${action === 'replay' ? 'deliveries' : 'events'} in ${chunks} chunks for tenant ${tenantId}`,
      );
    return { dryRun: false, count, chunks };
  }

  /**
   * Starts `backfill` in the background and answers at once (for HTTP, where a backfill of many events outlasts a
   * request): its id, and the dry-run count of the rows it will create. Refused, as `backfill`, before anything
   * starts. A failure is logged; the same request resumes it. `backfills` shows its progress.
   */
  async startBackfill(
    consumer: string,
    request: Omit<OutboxBackfillRequest, 'dryRun'>,
    options: OutboxActionOptions = {},
  ): Promise<{ backfillId: string; deliveries: number }> {
    const { backfillId, deliveries } = await this.backfill(consumer, { ...request, dryRun: true });
    void this.backfill(consumer, { ...request, dryRun: false }, options).catch((error: unknown) =>
      this.logger.error(
        `backfill ${backfillId} of "${consumer}" failed (the same request resumes it): ${errorText(error)}`,
      ),
    );
    return { backfillId, deliveries };
  }

  /** The backfills of a consumer (or of every one), newest first, with their progress. */
  async backfills(consumer?: string): Promise<OutboxBackfillState[]> {
    const name = checkConsumerName('consumer', consumer);
    return (await this.backfillRunner.list(name)).map((r) => ({
      backfillId: r.id,
      consumer: r.consumer_name,
      tenantId: r.tenant_id,
      since: r.since,
      eventNames: r.event_names,
      created: Number(r.created_rows),
      chunks: r.chunks,
      startedAt: r.started_at,
      updatedAt: r.updated_at,
      finishedAt: r.finished_at,
    }));
  }

  /**
   * Gives a consumer that joined late the deliveries of retained events that fanned out before it was registered
   * (docs/delivery.md#consumers-that-join-late): one pending delivery, due now, per event of `since` or later (of
   * `tenantId`, of `eventNames`) it has none for, in chunks of `chunkSize` events with `pauseMs` between them.
   * Each event gets at most one row (a row the fan-out wrote is kept); events still pending fan out to it anyway.
   * The consumer must be registered and live (an instance hosts it). Resumable: the same request again continues
   * where a crashed or stopped run left off, and does nothing once finished. `dryRun` counts and changes nothing.
   * With `audit`, one audit row (action `backfill`, the rows created) when the run ends.
   */
  async backfill(
    consumer: string,
    request: OutboxBackfillRequest,
    options: OutboxActionOptions = {},
  ): Promise<OutboxBackfillReport> {
    const name = checkConsumerName('consumer', consumer);
    if (name === null)
      throw new OutboxValidationError('consumer', messages.badText('consumer', 200, consumer));
    const tenantId = request?.tenantId === undefined ? null : checkUuid('tenantId', request.tenantId);
    const since = checkSince(request?.since);
    const eventNames = checkEventNames(request?.eventNames);
    const chunkSize = checkInteger('chunkSize', request?.chunkSize, 1, 10_000, BACKFILL_CHUNK_SIZE);
    const pauseMs = checkInteger('pauseMs', request?.pauseMs, 0, 60_000, BACKFILL_PAUSE_MS);
    const scope = { consumer: name, tenantId, since, eventNames };
    const backfillId = this.backfillRunner.backfillId(scope);
    if (request.dryRun === true) {
      const deliveries = await this.backfillRunner.count(scope);
      return { backfillId, dryRun: true, deliveries, totalCreated: 0, chunks: 0, finished: false };
    }
    const audit = audited(options, 'backfill', {
      consumer: name,
      backfillId,
      since: since?.toISOString() ?? 'oldest',
      eventNames,
    });
    const result = await this.backfillRunner.run(scope, { chunkSize, pauseMs });
    if (audit) {
      const auditTenant = tenantId ?? NIL_UUID;
      await this.write(auditTenant, (runner) =>
        this.store.rows(
          runner,
          bq.insertAudit(this.options.names, {
            ...audit,
            target: { ...audit.target, finished: result.finished },
            tenantId: auditTenant,
            rows: result.created,
          }),
        ),
      );
    }
    if (result.created > 0) {
      this.logger.log(
        `backfill ${backfillId} of "${name}" created ${result.created} deliveries` +
          `${tenantId === null ? '' : ` for tenant ${tenantId}`}${result.finished ? '' : ' (stopped; run it again to resume)'}`,
      );
      this.relay.wake();
    }
    return {
      backfillId,
      dryRun: false,
      deliveries: result.created,
      totalCreated: result.totalCreated,
      chunks: result.chunks,
      finished: result.finished,
    };
  }

  /**
   * Pauses one of the tenant's webhook subscriptions (its deliveries wait, no attempt spent) or resumes it
   * (`paused: false`). Returns false when the tenant has no subscription of that name.
   */
  async setSubscriptionPaused(
    tenantId: string,
    name: string,
    paused: boolean,
    options: OutboxActionOptions = {},
  ): Promise<boolean> {
    if (!this.subscriptions?.enabled) throw new OutboxError(messages.webhookSubscriptionsDisabled());
    const tenant = checkUuid('tenantId', tenantId);
    const subscription = checkConsumerName('name', name);
    if (subscription === null) throw new OutboxValidationError('name', messages.badText('name', 200, name));
    const audit = audited(options, paused ? 'pauseSubscription' : 'resumeSubscription', {
      subscription,
    });
    const found = await this.write(tenant, async (runner) => {
      const rows = await this.store.rows(
        runner,
        wq.setSubscriptionStatus(
          this.options.names,
          tenant,
          subscription,
          subscriptionConsumerName(subscription),
          paused ? 'paused' : 'active',
        ),
      );
      if (audit)
        await this.store.rows(
          runner,
          bq.insertAudit(this.options.names, { ...audit, tenantId: tenant, rows: rows.length }),
        );
      return rows.length > 0;
    });
    this.subscriptions?.invalidate(tenant);
    if (found && !paused) this.relay.wake();
    return found;
  }

  /**
   * Pauses a consumer for one tenant (`scope.tenantId`) or for every tenant, in the database, for every relay:
   * from the next claim on, no relay hands out its deliveries of that tenant (a delivery in flight finishes).
   * Events enqueued meanwhile still fan out to it, as pending deliveries with no attempt charged, and reach its
   * other consumers as usual; `resumeConsumer` makes them due, in order (docs/flow-control.md). The consumer must
   * be in the persisted registry. Returns false when the pair was paused already (the first pause is kept). With
   * `audit`, an audit row (action `pauseConsumer`) in the tenant's log (the nil tenant's for every tenant).
   */
  async pauseConsumer(
    consumer: string,
    scope: OutboxConsumerPauseScope = {},
    options: OutboxActionOptions = {},
  ): Promise<boolean> {
    const { name, tenantId } = this.pauseTarget(consumer, scope);
    const reason = checkText('reason', scope?.reason, 500);
    const audit = audited(options, 'pauseConsumer', {
      consumer: name,
      allTenants: tenantId === null,
      reason,
    });
    const [known] = await this.store.query<{ known: boolean }>(pq.consumerKnown(this.options.names, name));
    if (!known?.known) throw new OutboxValidationError('consumer', messages.pauseUnknownConsumer(name));
    const paused = await this.pauseWrite(
      tenantId,
      pq.pauseConsumer(this.options.names, {
        consumer: name,
        tenantId,
        pausedBy: audit?.actor ?? null,
        reason,
      }),
      audit,
    );
    if (paused)
      this.logger.log(
        `consumer "${name}" paused for ${tenantId === null ? 'every tenant' : `tenant ${tenantId}`}`,
      );
    return paused;
  }

  /**
   * Resumes a consumer paused by `pauseConsumer` for the same scope (leave `tenantId` out to lift the pause of
   * every tenant: a tenant's own pause stays). Its deliveries that waited are due at once; this instance's relay
   * is woken (the others find them at their next poll). Returns false when that pair was not paused. With
   * `audit`, an audit row (action `resumeConsumer`).
   */
  async resumeConsumer(
    consumer: string,
    scope: Pick<OutboxConsumerPauseScope, 'tenantId'> = {},
    options: OutboxActionOptions = {},
  ): Promise<boolean> {
    const { name, tenantId } = this.pauseTarget(consumer, scope);
    const audit = audited(options, 'resumeConsumer', { consumer: name, allTenants: tenantId === null });
    const resumed = await this.pauseWrite(
      tenantId,
      pq.resumeConsumer(this.options.names, { consumer: name, tenantId }),
      audit,
    );
    if (resumed) {
      this.logger.log(
        `consumer "${name}" resumed for ${tenantId === null ? 'every tenant' : `tenant ${tenantId}`}`,
      );
      this.relay.wake();
    }
    return resumed;
  }

  /** The pauses in force: those that apply to `tenantId` (its own and every tenant's), or all of them. */
  async pausedConsumers(tenantId?: string): Promise<OutboxConsumerPause[]> {
    const tenant = tenantId === undefined ? null : checkUuid('tenantId', tenantId);
    const rows = await this.store.query<pq.ConsumerPauseRow>(pq.consumerPauses(this.options.names, tenant));
    return rows.map(toConsumerPause);
  }

  /** The consumer and tenant of a pause or resume, checked. */
  private pauseTarget(
    consumer: string,
    scope: Pick<OutboxConsumerPauseScope, 'tenantId'>,
  ): { name: string; tenantId: string | null } {
    const name = checkConsumerName('consumer', consumer);
    if (name === null)
      throw new OutboxValidationError('consumer', messages.badText('consumer', 200, consumer));
    const tenantId = scope?.tenantId === undefined ? null : checkUuid('tenantId', scope.tenantId);
    return { name, tenantId };
  }

  /**
   * A pause's or a resume's statement, with its audit row, under the admin lock of its tenant (the nil tenant's
   * for every tenant): two writes of one pair run one after the other. True when it changed a row.
   */
  private async pauseWrite(
    tenantId: string | null,
    statement: SqlStatement,
    audit: Audit | null,
  ): Promise<boolean> {
    const tenant = tenantId ?? NIL_UUID;
    return this.write(tenant, async (runner) => {
      const rows = await this.store.rows(runner, statement);
      if (audit)
        await this.store.rows(
          runner,
          bq.insertAudit(this.options.names, { ...audit, tenantId: tenant, rows: rows.length }),
        );
      return rows.length > 0;
    });
  }

  /** A page of the tenant's audit log (actions taken with `audit`), newest first. */
  async auditLog(
    tenantId: string,
    query: { limit?: number; beforeId?: string } = {},
  ): Promise<OutboxAuditEntry[]> {
    const tenant = checkUuid('tenantId', tenantId);
    const limit = checkInteger('limit', query.limit, 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE);
    const before = query.beforeId === undefined ? null : checkId('beforeId', query.beforeId);
    const rows = await this.read(tenant, (runner) =>
      this.store.rows<AuditRow>(runner, bq.auditLog(this.options.names, tenant, limit, before)),
    );
    return rows.map((r) => ({
      id: r.id,
      actor: r.actor,
      action: r.action,
      target: r.target,
      rows: r.rows_affected,
      at: r.created_at,
    }));
  }

  /**
   * Removes a consumer that no instance hosts any more from the persisted registry, so fan-out stops creating
   * delivery rows for it (shared by every tenant). Refused while an instance still reports it within
   * `registry.orphanAfterMs`. Returns false when the registry does not know the name.
   */
  async forgetConsumer(name: string): Promise<boolean> {
    const consumer = checkConsumerName('name', name);
    if (consumer === null) throw new OutboxValidationError('name', messages.badText('name', 200, name));
    const [row] = await this.store.query<{ found: number; live: boolean; deleted: number }>(
      q.forgetConsumer(this.options.names, consumer, this.options.registry.orphanAfterMs),
    );
    if (row.live)
      throw new OutboxValidationError(
        'name',
        messages.consumerStillLive(consumer, this.options.registry.orphanAfterMs),
      );
    if (row.deleted > 0)
      this.logger.log(
        `consumer "${consumer}" removed from the registry; fan-out no longer creates its deliveries`,
      );
    return row.deleted > 0;
  }

  /**
   * Runs the doctor's checks on the app's database, as the app's role (docs/doctor.md): what holds the vacuum
   * horizon back, the outbox tables' size, bloat and vacuum state, missing or invalid indexes, the backlog, dead
   * deliveries and the migrations applied, each with a severity and what to do. Not tenant-scoped: it reads the
   * whole database (a role under row-level security counts its own tenant's dead deliveries only; the report
   * says so). The migrations table is the DataSource's `migrationsTableName`.
   */
  async doctor(options: { thresholds?: OutboxDoctorThresholds } = {}): Promise<OutboxDoctorReport> {
    return examineOutbox((statement) => this.store.query(statement), {
      names: this.options.names,
      orphanAfterMs: this.options.registry.orphanAfterMs,
      migrationsTable: this.store.dataSource().options.migrationsTableName ?? 'migrations',
      thresholds: options.thresholds,
      pendingAge: this.pendingAge,
    });
  }

  private async replay(statement: SqlStatement, tenantId: string, audit: Audit | null): Promise<number> {
    const [row] = await this.write(tenantId, async (runner) => {
      const rows = await this.store.rows<{ reset: number; events: number }>(runner, statement);
      if (audit)
        await this.store.rows(
          runner,
          bq.insertAudit(this.options.names, { ...audit, tenantId, rows: rows[0]!.reset }),
        );
      return rows;
    });
    if (row.reset > 0) {
      this.logger.log(`replay reset ${row.reset} deliveries of ${row.events} events for tenant ${tenantId}`);
      this.relay.wake();
    }
    return row.reset;
  }

  private async purge(statement: SqlStatement, tenantId: string, audit: Audit | null): Promise<number> {
    const [row] = await this.write(tenantId, async (runner) => {
      const rows = await this.store.rows<{ purged: number }>(runner, statement);
      if (audit)
        await this.store.rows(
          runner,
          bq.insertAudit(this.options.names, { ...audit, tenantId, rows: rows[0]!.purged }),
        );
      return rows;
    });
    if (row.purged > 0)
      this.logger.log(
        `purged ${row.purged} events (with their deliveries and inbox rows) for tenant ${tenantId}`,
      );
    return row.purged;
  }

  private failedFilter(tenantId: string, filter: OutboxFailedFilter): q.FailedFilter {
    return {
      tenantId: checkUuid('tenantId', tenantId),
      consumer: checkConsumerName('consumer', filter?.consumer),
      eventName: checkEventName('eventName', filter?.eventName),
    };
  }

  /** A read-only transaction with the tenant set for row-level security. */
  private read<T>(tenantId: string, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    return this.store.transaction(async (runner) => {
      await this.store.rows(runner, q.setAdminTenant(this.options.tenantSetting, tenantId));
      return work(runner);
    });
  }

  /** A transaction with the tenant set, holding the tenant's admin lock (operators' writes run one at a time). */
  private write<T>(tenantId: string, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    return this.store.transaction(async (runner) => {
      await this.store.rows(
        runner,
        q.setAdminTenantForWrite(this.options.names, this.options.tenantSetting, tenantId),
      );
      return work(runner);
    });
  }
}

/** An audit row to write with an action, when the caller asked for one. */
interface Audit {
  actor: string;
  action: string;
  target: Record<string, unknown>;
}

function audited(
  options: OutboxActionOptions | undefined,
  action: string,
  target: Record<string, unknown>,
): Audit | null {
  const actor = options?.audit?.actor;
  if (actor === undefined) return null;
  const checked = checkConsumerName('audit.actor', actor);
  return { actor: checked!, action, target };
}

function checkSearch(tenantId: string, query: OutboxEventSearch): sq.EventSearch {
  const search: sq.EventSearch = {
    tenantId: checkUuid('tenantId', tenantId),
    eventId: query?.eventId === undefined ? null : checkUuid('eventId', query.eventId),
    aggregateType: checkText('aggregateType', query?.aggregateType, 200),
    aggregateId: checkText('aggregateId', query?.aggregateId, 200),
    correlationId: checkText('correlationId', query?.correlationId, 200),
    eventName: checkEventName('eventName', query?.eventName),
    beforeId: query?.beforeId === undefined ? null : checkUuid('beforeId', query.beforeId),
    limit: checkInteger('limit', query?.limit, 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE),
  };
  if (search.aggregateType !== null && search.aggregateId === null)
    throw new OutboxValidationError('aggregateId', messages.aggregateTypeAlone());
  if ([search.eventId, search.aggregateId, search.correlationId, search.eventName].every((v) => v === null))
    throw new OutboxValidationError('search', messages.searchNeedsField());
  return search;
}

function checkBulk(
  tenantId: string,
  request: OutboxBulkRequest,
  action: 'replay' | 'purge',
): { filter: bk.BulkFilter; chunkSize: number; dryRun: boolean } {
  const status: unknown = request?.status;
  const statuses: bk.BulkFilter['statuses'] =
    status === undefined
      ? action === 'replay'
        ? ['dead', 'failed']
        : ['dead']
      : status === 'dead' || (status === 'failed' && action === 'replay')
        ? [status]
        : [];
  if (statuses.length === 0) throw new OutboxValidationError('status', messages.bulkStatus(action, status));
  const from = checkDate('from', request?.from);
  const to = checkDate('to', request?.to);
  if (from !== null && to !== null && to.getTime() <= from.getTime())
    throw new OutboxValidationError('to', messages.bulkRange());
  const dryRun: unknown = request?.dryRun ?? false;
  if (typeof dryRun !== 'boolean')
    throw new OutboxValidationError('dryRun', messages.badOption('dryRun', 'true or false', dryRun));
  return {
    filter: {
      tenantId: checkUuid('tenantId', tenantId),
      consumer: checkConsumerName('consumer', request?.consumer),
      statuses,
      eventName: checkEventName('eventName', request?.eventName),
      from,
      to,
    },
    chunkSize: checkInteger('chunkSize', request?.chunkSize, 1, 10_000, BULK_CHUNK_SIZE),
    dryRun,
  };
}

/** A bulk action's filter as its audit row records it: the fields given, and the statuses taken. */
function bulkTarget(filter: bk.BulkFilter): Record<string, unknown> {
  const given: Omit<OutboxBulkFilter, 'status'> & { statuses: readonly string[] } = {
    statuses: filter.statuses,
  };
  if (filter.consumer !== null) given.consumer = filter.consumer;
  if (filter.eventName !== null) given.eventName = filter.eventName;
  if (filter.from !== null) given.from = filter.from;
  if (filter.to !== null) given.to = filter.to;
  return given;
}

function toEventMatch(row: sq.EventSearchRow): OutboxEventMatch {
  return {
    eventId: row.id,
    eventName: row.event_name,
    status: row.status as OutboxEventStatus,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    correlationId: row.correlation_id,
    createdAt: row.created_at,
    deliveriesOpen: row.deliveries_open,
    deliveriesDead: row.deliveries_dead,
  };
}

function checkSince(value: unknown): Date | null {
  if (value === 'oldest') return null;
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value;
  throw new OutboxValidationError(
    'since',
    messages.badOption('since', "a Date, or 'oldest' (every retained event)", value),
  );
}

function checkEventNames(value: unknown): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length === 0 || value.length > 100)
    throw new OutboxValidationError(
      'eventNames',
      messages.badOption('eventNames', 'an array of 1 to 100 event names or patterns', value),
    );
  value.forEach((name, i) => {
    if (!isEventPattern(name))
      throw new OutboxValidationError(`eventNames[${i}]`, messages.badPattern(`eventNames[${i}]`, name));
  });
  return [...(value as string[])];
}

function checkId(field: string, value: unknown): string {
  if (typeof value !== 'string' || !/^\d{1,18}$/.test(value))
    throw new OutboxValidationError(field, messages.badInteger(field, 1, null, value));
  return value;
}

function toConsumerPause(row: pq.ConsumerPauseRow): OutboxConsumerPause {
  return {
    consumer: row.consumer_name,
    tenantId: row.tenant_id,
    pausedAt: row.paused_at,
    pausedBy: row.paused_by,
    reason: row.reason,
    resumesAt: row.resumes_at,
  };
}

interface AuditRow {
  id: string;
  actor: string;
  action: string;
  target: Record<string, unknown>;
  rows_affected: number;
  created_at: Date;
}

interface StatsRow {
  events: Partial<Record<OutboxEventStatus, number>>;
  deliveries: [string, OutboxDeliveryStatus, number][];
  orphaned: string[];
  oldest_pending_age_seconds: number | null;
  blocked: (OutboxBlockedAggregate & { seq: string })[];
  blocked_count: number;
  next_delivery_at: Date | null;
}

type Json<T> = {
  [K in keyof T]: T[K] extends Date ? string : T[K] extends Date | null ? string | null : T[K];
};
type FailedEventJson = Omit<Json<OutboxFailedEvent>, 'deliveries'> & {
  deliveries: Json<OutboxFailedEvent['deliveries'][number]>[] | null;
};

interface EventDeliveriesRow {
  event_id: string;
  event_name: string;
  status: OutboxEventStatus;
  payload: OutboxEventDeliveries['payload'];
  aggregate_type: string | null;
  aggregate_id: string | null;
  correlation_id: string | null;
  dedupe_key: string | null;
  schema_version: number;
  occurred_at: Date;
  created_at: Date;
  deliver_at: Date | null;
  published_at: Date | null;
  failed_at: Date | null;
  error_message: string | null;
  deliveries_open: number;
  deliveries_dead: number;
  deliveries: Json<OutboxDeliveryRecord>[];
}

function date(value: string): Date;
function date(value: string | null): Date | null;
function date(value: string | null): Date | null {
  return value === null ? null : new Date(value);
}

function toFailedEvent(item: FailedEventJson): OutboxFailedEvent {
  return {
    ...item,
    occurredAt: date(item.occurredAt),
    createdAt: date(item.createdAt),
    failedAt: date(item.failedAt),
    deliveries: (item.deliveries ?? []).map((d) => ({ ...d, updatedAt: date(d.updatedAt) })),
  };
}

function toEventDeliveries(row: EventDeliveriesRow): OutboxEventDeliveries {
  return {
    eventId: row.event_id,
    eventName: row.event_name,
    status: row.status,
    payload: row.payload,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    correlationId: row.correlation_id,
    dedupeKey: row.dedupe_key,
    schemaVersion: row.schema_version,
    occurredAt: row.occurred_at,
    createdAt: row.created_at,
    deliverAt: row.deliver_at,
    publishedAt: row.published_at,
    failedAt: row.failed_at,
    error: row.error_message,
    deliveriesOpen: row.deliveries_open,
    deliveriesDead: row.deliveries_dead,
    deliveries: row.deliveries.map((d) => ({
      ...d,
      nextAttemptAt: date(d.nextAttemptAt),
      leaseExpiresAt: date(d.leaseExpiresAt),
      processedAt: date(d.processedAt),
      inboxAt: date(d.inboxAt),
      createdAt: date(d.createdAt),
      updatedAt: date(d.updatedAt),
    })),
  };
}
