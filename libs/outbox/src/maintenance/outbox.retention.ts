import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
  Optional,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { ScheduledInterval } from './scheduled-interval';
import { randomUUID } from 'node:crypto';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { errorText } from '../errors/error-text';
import { OutboxStallError } from '../errors/outbox.error';
import { OutboxStore } from '../store/outbox.store';
import * as q from '../store/sql/retention';
import { purgeKeyStarts } from '../store/sql/consumer-key-limits';
import type { SqlStatement } from '../store/sql/statement';
import { OUTBOX_CLOCK, systemClock, type Clock } from '../model/clock';
import { RetentionPositions } from './retention-positions';

/** What one retention run did. */
export interface RetentionRunResult {
  /** Events deleted, each with its delivery and inbox rows. */
  deletedEvents: number;
  /** Expired idempotency keys deleted (`dedupe.windowMs` of enqueue). */
  deletedKeys: number;
  /** Delete statements run (each its own short transaction). */
  batches: number;
  /** Why the run stopped before it found fewer than `retention.batchSize` events: retention is off, or another instance purges. */
  skipped?: 'disabled' | 'locked';
  /** Partitioned layout only (docs/partitioning.md), when not 0: ranges made ahead of now in this run. */
  partitionsMade?: number;
  /** Partitioned layout only, when not 0: ranges dropped whole, each with its events, deliveries and inbox rows. */
  partitionsDropped?: number;
}

/** Calls of one maintenance function per run at most (each a statement of its own). */
const MAX_PARTITION_STEPS = 100;

/**
 * Retention's duty cycle: after a full batch, the next one starts this many times the batch's own time later, so
 * a run keeps the database busy half the time at most (a batch of 1,000 that takes 100 ms under a held snapshot
 * leaves the relay's statements 100 ms before the next), and still purges a batch per twice its time: 5,000 events
 * a second at 100 ms, many times the inflow it keeps up with (docs/adr/1206-claims-that-start-past-the-settled.md,
 * addendum on the purge's pace).
 */
const PAUSE_PER_BATCH_TIME = 1;

/**
 * Deletes published (and `no_handlers`) events older than `retention.publishedDays`, with their delivery and
 * inbox rows, in batches of `retention.batchSize` until a batch comes back short, each full batch followed by a
 * pause as long as it took (`PAUSE_PER_BATCH_TIME`). Runs every
 * `retention.intervalMs` on instances where the relay is enabled, registered in the app's `SchedulerRegistry`;
 * `purgeNow()` runs it by hand. Failed (dead-lettered) events are never deleted here: replay or purge them with
 * `OutboxAdminService`. Then it deletes the expired idempotency keys of `enqueue` (`dedupe.windowMs`), in batches of
 * the same size (an expired key is free to use again whether or not it was deleted; this keeps the table small).
 *
 * One instance at a time: each batch first takes a transaction-level advisory try-lock; an instance that finds
 * it taken stops its run and leaves the work to the holder. Each batch is one short statement that skips rows
 * locked by others, so retention never waits on the relay nor holds locks for long.
 *
 * Each batch starts where this instance's last one ended (`RetentionPositions`), not from the oldest settled event:
 * while a snapshot is held, every event deleted since stays in the settled index, and a batch from the oldest would
 * read them all again. An instance's first run, and a run once an hour, start from the oldest, for the events
 * settled below a position after it passed (ADR 1206, addendum "Retention's purge").
 *
 * In the partitioned layout (docs/partitioning.md) a run first makes the ranges ahead of now, then drops each range
 * past the cut-off in which everything is settled; the batches of deletes then cover only the ranges that could not
 * be dropped and the default partitions. In today's layout those two steps are one cheap statement each that does
 * nothing.
 */
@Injectable()
export class OutboxRetention implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxRetention.name);
  private readonly interval: ScheduledInterval;
  private stopping: Promise<void> | null = null;
  private running: Promise<RetentionRunResult> | null = null;
  private readonly positions: RetentionPositions;
  private readonly clock: Clock;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    moduleRef: ModuleRef,
    @Optional() @Inject(OUTBOX_CLOCK) clock: Clock | null = null,
  ) {
    this.interval = new ScheduledInterval(moduleRef, `outbox-retention:${randomUUID().slice(0, 8)}`);
    this.clock = clock ?? systemClock;
    this.positions = new RetentionPositions(this.clock);
  }

  onApplicationBootstrap(): void {
    if (!this.options.relay.enabled || this.options.retention.publishedDays === 0) return;
    // tick() logs a failed run and never rejects
    this.interval.schedule(this.options.retention.intervalMs, () => void this.tick());
    this.logger.log(
      `retention: published events older than ${this.options.retention.publishedDays} days are deleted every ${this.options.retention.intervalMs} ms, ${this.options.retention.batchSize} at a time`,
    );
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  /** True while the purge is scheduled on this instance. */
  get isScheduled(): boolean {
    return this.interval.isScheduled;
  }

  /** Runs retention now (or joins the run in flight) and says what it deleted. */
  purgeNow(): Promise<RetentionRunResult> {
    if (this.options.retention.publishedDays === 0)
      return Promise.resolve({ deletedEvents: 0, deletedKeys: 0, batches: 0, skipped: 'disabled' });
    this.running ??= this.run().finally(() => (this.running = null));
    return this.running;
  }

  /** Unschedules the purge and waits for the batch in flight; safe to call twice. */
  stop(): Promise<void> {
    this.stopping ??= this.stopNow();
    return this.stopping;
  }

  /** A scheduled run: one at a time, never throws. */
  private async tick(): Promise<void> {
    if (this.running || this.stopping) return;
    try {
      await this.purgeNow();
    } catch (error) {
      this.logger.error(
        `retention run failed; will retry in ${this.options.retention.intervalMs} ms: ${errorText(error)}`,
      );
    }
  }

  private async run(): Promise<RetentionRunResult> {
    const { publishedDays, batchSize } = this.options.retention;
    const result: RetentionRunResult = { deletedEvents: 0, deletedKeys: 0, batches: 0 };
    const { names } = this.options;
    await this.partitions(result);
    this.positions.startRun();
    if (result.skipped === undefined)
      result.deletedEvents = await this.inBatches(
        () => q.purgeSettledBatch(names, publishedDays, batchSize, this.positions.current),
        result,
        (row: q.PurgeSettledRow) => this.positions.moveTo({ ranges: row.ranges ?? [], ats: row.ats ?? [] }),
      );
    if (result.skipped === undefined)
      result.deletedKeys = await this.inBatches(() => q.purgeDedupeKeysBatch(names, batchSize), result);
    if (result.deletedKeys > 0)
      this.logger.log(`retention deleted ${result.deletedKeys} expired idempotency keys`);
    // per-key rate logs a claim did not prune (their tenant got no more events): one bounded statement a run
    if (result.skipped === undefined)
      await this.store.relayQuery(purgeKeyStarts(names, batchSize), 'retention');
    if (result.deletedEvents > 0) {
      this.logger.log(
        `retention deleted ${result.deletedEvents} events published over ${publishedDays} days ago, in ${result.batches} batches`,
      );
    } else {
      this.logger.debug(
        `retention found nothing to delete${result.skipped === 'locked' ? ' (another instance is purging)' : ''}`,
      );
    }
    return result;
  }

  /**
   * The partitioned layout's steps: makes the ranges ahead (a step that returns -1 wants another call), then drops
   * the settled ranges past the cut-off one at a time (-1: the tables' lock was not granted within the function's
   * lock_timeout; the next run tries again). Counts only what was done, so today's layout adds no fields.
   */
  private async partitions(result: RetentionRunResult): Promise<void> {
    const { names, retention } = this.options;
    let made = 0;
    try {
      for (let step = 0; step < MAX_PARTITION_STEPS && !this.stopping; step++) {
        const [row] = await this.store.relayQuery<{ made: number | null }>(
          q.makePartitionsStep(names),
          'retention',
        );
        if (row.made === null) {
          result.skipped = 'locked';
          return;
        }
        if (row.made >= 0) {
          made += row.made;
          break;
        }
      }
    } catch (error) {
      if (error instanceof OutboxStallError) throw error; // the database does not answer: the run is over
      // the drops and deletes below do not need it: a failed step (the window's validation reading a large default
      // partition past the relay's statement bound, a lock not granted in time) is tried again at the next run
      this.logger.warn(
        `retention could not make the ranges ahead of now (docs/partitioning.md, "What the relay does"); new events go to the default partitions until it can: ${errorText(error)}`,
      );
    }
    let dropped = 0;
    for (let step = 0; step < MAX_PARTITION_STEPS && !this.stopping; step++) {
      const [row] = await this.store.relayQuery<{ dropped: number | null }>(
        q.dropPartitionStep(names, retention.publishedDays),
        'retention',
      );
      if (row.dropped === null) {
        result.skipped = 'locked';
        break;
      }
      if (row.dropped === -1)
        this.logger.warn(
          'retention could not lock the outbox tables within 500 ms to drop a settled range; it tries again at its next run',
        );
      if (row.dropped !== 1) break;
      dropped++;
    }
    if (made > 0) {
      result.partitionsMade = made;
      this.logger.log(`retention made ${made} ranges of the partitioned outbox tables ahead of now`);
    }
    if (dropped > 0) {
      result.partitionsDropped = dropped;
      this.logger.log(`retention dropped ${dropped} settled ranges of the partitioned outbox tables`);
    }
  }

  /**
   * Runs one purge statement until a batch comes back short (or another instance holds the lock: `skipped`),
   * counting its batches in `result`; returns the rows it deleted. `statement` is asked again for each batch and
   * `done` told of each batch that ran (retention's positions move with them).
   */
  private async inBatches<R extends { deleted: number | null }>(
    statement: () => SqlStatement,
    result: RetentionRunResult,
    done?: (row: R) => void,
  ): Promise<number> {
    let deleted = 0;
    while (!this.stopping) {
      const began = this.clock.now();
      // under the relay's bounds: a purge that never gets its reply would keep retention from running again, and
      // one that is merely slow is cancelled by the server before the client-side deadline gives it up
      const [row] = await this.store.relayQuery<R>(statement(), 'retention');
      if (row.deleted === null) {
        result.skipped = 'locked';
        break;
      }
      done?.(row);
      result.batches++;
      deleted += row.deleted;
      if (row.deleted < this.options.retention.batchSize) break;
      // the duty cycle (PAUSE_PER_BATCH_TIME): batches back to back are what a held snapshot makes slow
      await this.pause(Math.max(0, this.clock.now() - began) * PAUSE_PER_BATCH_TIME);
    }
    return deleted;
  }

  /** Waits `ms` between two batches of a run (a unit spec counts the pauses instead). */
  protected pause(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  private async stopNow(): Promise<void> {
    this.interval.unschedule();
    await this.running?.catch(() => undefined);
  }
}
