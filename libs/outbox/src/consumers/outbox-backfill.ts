import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { setTimeout as sleep } from 'node:timers/promises';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OutboxStore } from '../store/outbox.store';
import * as q from '../store/sql/backfill';
import { notifyWakeup } from '../store/sql/wakeup';
import { setAdminTenant } from '../store/sql/admin';
import { OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { errorText } from '../errors/error-text';
import { OutboxConsumerRegistry } from './outbox-consumer.registry';

/** Delivery rows per chunk (one transaction each) unless the call says otherwise. */
export const BACKFILL_CHUNK_SIZE = 1_000;
/**
 * Pause between chunks, in ms, unless the call says otherwise: about 1,000 rows a second, below what a relay
 * delivers to an in-process consumer, so live events keep their latency (figures: ADR 1011).
 */
export const BACKFILL_PAUSE_MS = 1_000;
/** Pause before looking again at an event a relay holds under a lean lease (see `fillBackfillChunk`). */
const LEASED_EVENT_PAUSE_MS = 100;
/** Pause before the boot backfill of a consumer looks again for its registration, or retries after an error. */
const BOOT_RETRY_MS = 1_000;

/** What a backfill covers: one consumer's missing rows for retained events. */
export interface OutboxBackfillScope {
  consumer: string;
  /** One tenant, or null (every tenant the connection sees: all for the table owner, one under row-level security). */
  tenantId: string | null;
  /** Events inserted at or after this time; null: the oldest retained. */
  since: Date | null;
  /** Only events matching these names or patterns; null: every event the consumer listens to. */
  eventNames: readonly string[] | null;
}

/** How a backfill runs. */
export interface OutboxBackfillPace {
  /** Delivery rows per chunk. Default 1,000. */
  chunkSize?: number;
  /** Pause between chunks, in ms (0: none). Default 1,000. */
  pauseMs?: number;
}

/** What running a backfill did. */
export interface OutboxBackfillResult {
  /** The backfill's id: the same scope has the same id, and running it again resumes it. */
  backfillId: string;
  /** Delivery rows this run created. */
  created: number;
  /** Chunks this run committed. */
  chunks: number;
  /** Delivery rows created by every run of this backfill. */
  totalCreated: number;
  /** True once it reached its horizon; false when stopped (the app shut down): run it again to resume. */
  finished: boolean;
}

/**
 * Backfills: gives a consumer that joined late the delivery rows of retained events that fanned out before it
 * was registered (pending, due now; the relay's claim of due deliveries takes them), in chunks of
 * `chunkSize` events, one transaction each that commits its rows and its position together, with a pause between
 * chunks so that the relay's live work keeps its latency. Running the same backfill again resumes it; a finished
 * one is not repeated. At bootstrap, on an instance whose relay is enabled, each consumer whose `startFrom` is not
 * `'registration'` gets its backfill, in the background, once an instance reported it. The rules that keep each
 * event to one row: `fillBackfillChunk`; why so: docs/adr/1011-backfill-for-late-consumers.md.
 */
@Injectable()
export class OutboxBackfill implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxBackfill.name);
  private stopped = false;
  private readonly stop = new AbortController();
  private readonly boots: Promise<void>[] = [];
  /** The runs in flight, which shutdown waits for (each stops after its chunk). */
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    private readonly registry: OutboxConsumerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.relay.enabled) return;
    for (const consumer of this.registry.consumers()) {
      const start = consumer.startFrom ?? 'registration';
      if (start === 'registration') continue;
      const scope = {
        consumer: consumer.name,
        tenantId: null,
        since: start === 'oldest' ? null : start,
        eventNames: null,
      };
      this.boots.push(this.boot(scope));
    }
  }

  /** Stops the backfills in flight after their chunk (they resume at the next run); safe to call twice. */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.stop.abort();
    await Promise.all(this.boots);
    await Promise.allSettled([...this.running]);
  }

  /** The id of the backfill of this scope: the same scope, the same id. */
  backfillId(scope: OutboxBackfillScope): string {
    const key = JSON.stringify([
      scope.consumer,
      scope.tenantId,
      scope.since?.toISOString() ?? null,
      scope.eventNames === null ? null : [...scope.eventNames].sort(),
    ]);
    const hex = createHash('sha256').update(key).digest('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
  }

  /** A dry run: how many delivery rows the backfill would create now. */
  async count(scope: OutboxBackfillScope): Promise<number> {
    await this.registered(scope.consumer);
    const [row] = await this.inTenant(scope.tenantId, (runner) =>
      this.store.rows<{ events: number }>(runner, q.countBackfill(this.options.names, scope)),
    );
    return row!.events;
  }

  /**
   * Runs the backfill of this scope to its horizon (or resumes it), chunk by chunk. Refused when the consumer
   * is not registered, or no instance reported it within `registry.liveWithinMs`.
   */
  run(scope: OutboxBackfillScope, pace: OutboxBackfillPace = {}): Promise<OutboxBackfillResult> {
    const run = this.chunks(scope, pace);
    this.running.add(run);
    return run.finally(() => this.running.delete(run));
  }

  private async chunks(scope: OutboxBackfillScope, pace: OutboxBackfillPace): Promise<OutboxBackfillResult> {
    const chunkSize = pace.chunkSize ?? BACKFILL_CHUNK_SIZE;
    const pauseMs = pace.pauseMs ?? BACKFILL_PAUSE_MS;
    await this.registered(scope.consumer);
    const backfillId = this.backfillId(scope);
    const [row] = await this.inTenant(scope.tenantId, (runner) =>
      this.store.rows<q.BackfillRow>(runner, q.startBackfill(this.options.names, backfillId, scope)),
    );
    const result = {
      backfillId,
      created: 0,
      chunks: 0,
      totalCreated: Number(row!.created_rows),
      finished: false,
    };
    if (row!.finished_at !== null) return { ...result, finished: true };
    const horizon = row!.horizon_id;
    while (!this.stopped) {
      const chunk = await this.inTenant(scope.tenantId, async (runner) => {
        const [b] = await this.store.rows<q.BackfillRow>(
          runner,
          q.lockBackfill(this.options.names, backfillId),
        );
        if (b!.finished_at !== null) return { created: 0, waiting: false, finished: true };
        const from = b!.position_id;
        const [locked] =
          horizon === null
            ? [{ n: 0, last: null }]
            : await this.store.rows<{ n: number; last: string | null }>(
                runner,
                q.lockBackfillChunk(this.options.names, scope, from, horizon, chunkSize),
              );
        const to = locked!.last ?? horizon;
        const [filled] = await this.store.rows<{ created: number; waiting: boolean; finished: boolean }>(
          runner,
          q.fillBackfillChunk(this.options.names, {
            ...scope,
            id: backfillId,
            from,
            to: to!,
            last: locked!.n < chunkSize,
          }),
        );
        return filled!;
      });
      result.chunks += 1;
      result.created += chunk.created;
      result.totalCreated += chunk.created;
      if (chunk.created > 0) await this.wake(scope.tenantId);
      if (chunk.finished) return { ...result, finished: true };
      const pause = chunk.waiting ? Math.max(pauseMs, LEASED_EVENT_PAUSE_MS) : pauseMs;
      if (pause > 0) await this.pause(pause);
    }
    return result;
  }

  /** Backfills of a consumer (or every one), newest first. */
  async list(consumer: string | null, limit = 50): Promise<q.BackfillRow[]> {
    return this.store.query<q.BackfillRow>(q.listBackfills(this.options.names, consumer, limit));
  }

  private async boot(scope: OutboxBackfillScope): Promise<void> {
    while (!this.stopped) {
      try {
        const result = await this.run(scope);
        if (result.finished && result.chunks > 0)
          this.logger.log(
            `backfill of "${scope.consumer}" (startFrom ${scope.since?.toISOString() ?? 'oldest'}) finished: ` +
              `${result.totalCreated} deliveries created`,
          );
        return;
      } catch (error) {
        // not registered yet (the relay's first heartbeat runs beside this), or the database failed: again soon
        if (!(error instanceof OutboxValidationError))
          this.logger.warn(`backfill of "${scope.consumer}" failed, retrying: ${errorText(error)}`);
        await this.pause(BOOT_RETRY_MS);
      }
    }
  }

  private async registered(consumer: string): Promise<void> {
    const liveWithinMs = this.options.registry.liveWithinMs;
    const [row] = await this.store.query<{ ordered: boolean; live: boolean }>(
      q.backfillConsumer(this.options.names, consumer, liveWithinMs),
    );
    if (!row) throw new OutboxValidationError('consumer', messages.backfillUnknownConsumer(consumer));
    if (!row.live)
      throw new OutboxValidationError('consumer', messages.backfillConsumerNotLive(consumer, liveWithinMs));
  }

  /** A transaction, with the tenant set for row-level security when the backfill names one. */
  private inTenant<T>(tenantId: string | null, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    return this.store.transaction(async (runner) => {
      if (tenantId !== null)
        await this.store.rows(runner, setAdminTenant(this.options.tenantSetting, tenantId));
      return work(runner);
    });
  }

  private async wake(tenantId: string | null): Promise<void> {
    await this.store
      .query(notifyWakeup(this.options.names, tenantId === null ? [] : [tenantId]))
      .catch(() => undefined); // the relay's poll finds the rows anyway
  }

  private async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.stop.signal }).catch(() => undefined);
  }
}
