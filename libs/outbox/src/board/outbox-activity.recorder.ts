import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { errorText } from '../errors/error-text';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OutboxStore } from '../store/outbox.store';
import { recordActivity, type ActivityRow } from '../admin/board-sql';
import type { OutboxBoardModuleOptions } from './outbox-board-options.interface';
import { OUTBOX_BOARD_OPTIONS } from './outbox-board.constants';

const MINUTE_MS = 60_000;

/**
 * Sums this instance's delivery outcomes per tenant, consumer and minute in memory and adds them to
 * `outbox_activity` every `activityFlushMs`, in one statement for every tenant (which keeps 24 hours of minutes):
 * the board's chart of the last 30 minutes to 24 hours reads those few rows instead of the delivery history. Counts are attempts as they ended; a batch that
 * then rolled back (a lease lost) shows its attempts twice, as they ended and as the failures recorded after.
 */
@Injectable()
export class OutboxActivityRecorder implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OutboxActivityRecorder.name);
  private readonly intervalName = `outbox-board-activity:${randomUUID().slice(0, 8)}`;
  private counts = new Map<string, ActivityRow>();
  private detach: (() => void) | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    @Inject(OUTBOX_BOARD_OPTIONS) private readonly options: OutboxBoardModuleOptions,
    private readonly instrumentation: OutboxInstrumentation,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly outboxOptions: ResolvedOutboxOptions,
    private readonly store: OutboxStore,
    private readonly moduleRef: ModuleRef,
  ) {}

  onApplicationBootstrap(): void {
    if (this.options.recordActivity === false) return;
    this.detach = this.instrumentation.add({
      attemptStarted: (delivery, consumer) => ({
        ended: (outcome) => this.count(delivery.event.tenantId, consumer.name, outcome.status),
      }),
    });
    this.moduleRef.get(SchedulerRegistry, { strict: false }).addInterval(
      this.intervalName,
      // flush() logs a failed write and never rejects
      setInterval(() => void this.flush(), this.options.activityFlushMs ?? 5000),
    );
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.detach) return;
    this.detach();
    this.detach = null;
    const scheduler = this.moduleRef.get(SchedulerRegistry, { strict: false });
    if (scheduler.doesExist('interval', this.intervalName)) scheduler.deleteInterval(this.intervalName);
    await this.flush();
  }

  /** Writes what was summed since the last flush (one at a time; never throws: a failed flush is logged and dropped). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.counts.size === 0) return;
    const rows = [...this.counts.values()];
    this.counts = new Map();
    this.flushing = this.store
      .query(recordActivity(this.outboxOptions.names, rows))
      .then(() => undefined)
      .catch((error: unknown) =>
        this.logger.warn(`could not record the board's activity of ${rows.length} rows: ${errorText(error)}`),
      )
      .finally(() => (this.flushing = null));
    await this.flushing;
  }

  private count(tenantId: string, consumer: string, status: keyof Counts): void {
    const minute = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
    const key = `${tenantId} ${minute} ${consumer}`;
    let row = this.counts.get(key);
    if (!row) {
      row = { tenantId, minute: new Date(minute), consumer, delivered: 0, failed: 0, dead: 0, deferred: 0 };
      this.counts.set(key, row);
    }
    row[status]++;
  }
}

type Counts = Pick<ActivityRow, 'delivered' | 'failed' | 'dead' | 'deferred'>;
