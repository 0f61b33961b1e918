import { Inject, Injectable, Optional } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type {
  OutboxWebhookCircuitState,
  OutboxWebhookSubscription,
} from '../webhooks/outbox-webhook-options.interface';
import { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { OutboxWebhookService } from '../webhooks/outbox-webhook.service';
import { OutboxWebhookSubscriptions } from '../webhooks/outbox-webhook-subscriptions.service';
import { OutboxStore } from '../store/outbox.store';
import * as bq from '../admin/board-sql';
import * as pq from '../store/sql/consumer-pauses';
import { checkConsumerName, checkEventName, checkUuid } from '../admin/admin-validation';
import type { OutboxBlockedAggregate } from '../admin/outbox-admin.interfaces';

/** Open rows counted exactly up to this many per status; the board shows "10,000+" beyond. */
export const BOARD_COUNT_CAP = 10_000;
/**
 * The spans the activity chart offers, and the minutes per bar of each: all read from the per-minute
 * `outbox_activity`, which keeps 24 hours (docs/adr/1013-search-bulk-actions-and-hours-of-activity.md).
 */
export const BOARD_ACTIVITY_RANGES = {
  '30m': { minutes: 30, bucketMinutes: 1, label: 'last 30 minutes' },
  '1h': { minutes: 60, bucketMinutes: 1, label: 'last hour' },
  '6h': { minutes: 360, bucketMinutes: 5, label: 'last 6 hours' },
  '24h': { minutes: 1440, bucketMinutes: 20, label: 'last 24 hours' },
} as const;

/** A span of the activity chart; `30m` unless the page asks for another. */
export type BoardActivityRange = keyof typeof BOARD_ACTIVITY_RANGES;

/** The range a query string names, or the default (an unknown value is not an error: the chart falls back). */
export function activityRange(value: unknown): BoardActivityRange {
  return typeof value === 'string' && Object.hasOwn(BOARD_ACTIVITY_RANGES, value)
    ? (value as BoardActivityRange)
    : '30m';
}
/** Rows per page of the failures list. */
export const BOARD_PAGE_SIZE = 50;

/** How a consumer delivers, as the board names it. */
export type BoardConsumerKind = 'in-process' | 'webhook' | 'transport' | 'broker' | 'unknown';

/** One consumer's line of the overview. */
export interface BoardConsumerCounts {
  name: string;
  kind: BoardConsumerKind;
  patterns: readonly string[];
  ordered: boolean;
  pending: number;
  processing: number;
  failed: number;
  dead: number;
  /** The planner's estimate of the consumer's delivered rows. */
  deliveredEstimate: number;
  oldestWaitingAt: Date | null;
  /** Named in open rows, and no live instance hosts it: its rows wait forever. */
  orphaned: boolean;
}

/** The overview of one tenant. */
export interface BoardOverview {
  tenantId: string;
  at: Date;
  /** Counts of open statuses exact up to `BOARD_COUNT_CAP`; `published` and `no_handlers` are estimates. */
  events: {
    pending: number;
    processing: number;
    failed: number;
    /** Delayed events not due yet. */
    scheduled: number;
    published: number;
    no_handlers: number;
  };
  consumers: BoardConsumerCounts[];
  oldestPendingAgeSeconds: number | null;
  /** The chart's span. */
  activityRange: BoardActivityRange;
  /** One entry per bucket of the range (its first minute), oldest first, every bucket present. */
  activity: { minute: Date; delivered: number; failed: number; dead: number }[];
}

/** One failed or dead delivery of the failures list. */
export interface BoardTrouble {
  id: string;
  eventId: string;
  eventName: string;
  consumer: string;
  status: 'failed' | 'dead';
  attempts: number;
  errorCode: string | null;
  lastError: string | null;
  nextAttemptAt: Date;
  updatedAt: Date;
}

/** What the consumers page shows besides the counts. */
export interface BoardConsumersView {
  overview: BoardOverview;
  circuits: OutboxWebhookCircuitState[];
  subscriptions: OutboxWebhookSubscription[];
  blocked: Omit<OutboxBlockedAggregate, 'waitingDeliveries'>[];
  /** The pauses that apply to this tenant: its own (`tenantId` set) and those of every tenant (null). */
  pauses: pq.ConsumerPauseRow[];
}

/**
 * The board's reads of one tenant, each in a read transaction with the tenant set for row-level security, and
 * each bounded: none reads the tenant's delivered history (see `admin/board-sql.ts`).
 */
@Injectable()
export class OutboxBoardService {
  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    private readonly registry: OutboxConsumerRegistry,
    // explicit tokens: the emitted type of `X | null` is Object
    @Optional() @Inject(OutboxWebhookService) private readonly webhooks: OutboxWebhookService | null,
    @Optional()
    @Inject(OutboxWebhookSubscriptions)
    private readonly subscriptions: OutboxWebhookSubscriptions | null,
  ) {}

  /** Counts, oldest waiting work and the activity over `range` of one tenant. */
  async overview(tenantId: string, range: BoardActivityRange = '30m'): Promise<BoardOverview> {
    const tenant = checkUuid('tenantId', tenantId);
    const { minutes, bucketMinutes } = BOARD_ACTIVITY_RANGES[range];
    const bucketMs = bucketMinutes * 60_000;
    const buckets = minutes / bucketMinutes;
    const known = await this.knownConsumers(tenant);
    const [row] = await this.read(tenant, (runner) =>
      this.store.rows<OverviewRow>(
        runner,
        bq.boardOverview(this.options.names, {
          tenantId: tenant,
          cap: BOARD_COUNT_CAP,
          consumers: [...known.keys()],
          minutes,
          orphanAfterMs: this.options.registry.orphanAfterMs,
          bucketMinutes,
        }),
      ),
    );
    const at = new Date(row!.now);
    const consumers = row!.consumers.map((c): BoardConsumerCounts => {
      const consumer = known.get(c.name);
      return {
        ...c,
        kind: consumer ? (consumer.kind === 'handler' ? 'in-process' : consumer.kind) : 'unknown',
        patterns: consumer?.eventNames ?? [],
        ordered: consumer?.ordered ?? false,
        deliveredEstimate: Number(c.deliveredEstimate),
        oldestWaitingAt: c.oldestWaitingAt ? new Date(c.oldestWaitingAt) : null,
      };
    });
    const waiting = [
      row!.oldest_pending_event_at ? new Date(row!.oldest_pending_event_at).getTime() : null,
      ...consumers.filter((c) => !c.orphaned).map((c) => c.oldestWaitingAt?.getTime() ?? null),
    ].filter((t): t is number => t !== null);
    const byMinute = new Map(row!.activity.map((a) => [new Date(a.minute).getTime(), a]));
    const lastBucket = Math.floor(at.getTime() / bucketMs) * bucketMs;
    const activity = Array.from({ length: buckets }, (_, i) => {
      const minute = lastBucket - (buckets - 1 - i) * bucketMs;
      const found = byMinute.get(minute);
      return {
        minute: new Date(minute),
        delivered: found?.delivered ?? 0,
        failed: found?.failed ?? 0,
        dead: found?.dead ?? 0,
      };
    });
    return {
      tenantId: tenant,
      at,
      events: {
        ...row!.events,
        published: Number(row!.events.published),
        no_handlers: Number(row!.events.no_handlers),
      },
      consumers,
      oldestPendingAgeSeconds:
        waiting.length === 0 ? null : Math.max(0, (at.getTime() - Math.min(...waiting)) / 1000),
      activityRange: range,
      activity,
    };
  }

  /** A page of failed (retrying) and dead deliveries, newest first, filtered by consumer and event name. */
  async troubles(
    tenantId: string,
    filter: { consumer?: string; eventName?: string; beforeId?: string },
  ): Promise<BoardTrouble[]> {
    const tenant = checkUuid('tenantId', tenantId);
    const consumer = checkConsumerName('consumer', filter.consumer || undefined);
    const eventName = checkEventName('eventName', filter.eventName || undefined);
    const beforeId = filter.beforeId && /^\d{1,18}$/.test(filter.beforeId) ? filter.beforeId : null;
    const rows = await this.read(tenant, (runner) =>
      this.store.rows<TroubleRow>(
        runner,
        bq.boardTroubles(this.options.names, {
          tenantId: tenant,
          consumer,
          eventName,
          beforeId,
          limit: BOARD_PAGE_SIZE,
        }),
      ),
    );
    return rows.map((r) => ({
      id: r.id,
      eventId: r.event_id,
      eventName: r.event_name,
      consumer: r.consumer_name,
      status: r.status,
      attempts: r.attempt_count,
      errorCode: r.error_code,
      lastError: r.last_error,
      nextAttemptAt: r.next_attempt_at,
      updatedAt: r.updated_at,
    }));
  }

  /** The overview plus circuits, subscriptions and blocked aggregates, for the consumers page. */
  async consumers(tenantId: string): Promise<BoardConsumersView> {
    const overview = await this.overview(tenantId);
    const tenant = overview.tenantId;
    const [blocked, subscriptions, pauses] = await Promise.all([
      this.read(tenant, (runner) =>
        this.store.rows<Omit<OutboxBlockedAggregate, 'waitingDeliveries'>>(
          runner,
          bq.boardBlockedAggregates(this.options.names, tenant, 100),
        ),
      ),
      this.subscriptions?.enabled ? this.subscriptions.list(tenant) : Promise.resolve([]),
      this.store.query<pq.ConsumerPauseRow>(pq.consumerPauses(this.options.names, tenant)),
    ]);
    return {
      overview,
      circuits: (this.webhooks?.circuitStates() ?? []).filter(
        (c) => c.tenantId === null || c.tenantId === tenant,
      ),
      subscriptions,
      blocked,
      pauses,
    };
  }

  /** The consumers this instance knows for the tenant: the registry's and the tenant-scoped ones, by name. */
  private async knownConsumers(tenantId: string): Promise<Map<string, OutboxConsumer>> {
    const known = new Map(this.registry.consumers().map((c) => [c.name, c]));
    for (const c of await this.registry.tenantConsumers(tenantId)) known.set(c.name, c);
    return known;
  }

  private read<T>(tenantId: string, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    return this.store.transaction(async (runner) => {
      await this.store.rows(runner, bq.setBoardContext(this.options.tenantSetting, tenantId));
      return work(runner);
    });
  }
}

interface OverviewRow {
  events: BoardOverview['events'] & { published: string | number; no_handlers: string | number };
  consumers: (Omit<BoardConsumerCounts, 'kind' | 'patterns' | 'ordered' | 'oldestWaitingAt'> & {
    oldestWaitingAt: string | null;
  })[];
  oldest_pending_event_at: string | Date | null;
  now: Date;
  activity: { minute: string; delivered: number; failed: number; dead: number }[];
}

interface TroubleRow {
  id: string;
  event_id: string;
  event_name: string;
  consumer_name: string;
  status: 'failed' | 'dead';
  attempt_count: number;
  error_code: string | null;
  last_error: string | null;
  next_attempt_at: Date;
  updated_at: Date;
}
