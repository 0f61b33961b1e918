import type { ModuleRef } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';

/**
 * An interval registered under a name in the app's `SchedulerRegistry` (the app imports `ScheduleModule`
 * once; the library never does, see STYLE). `unschedule` is safe to call twice and after @nestjs/schedule
 * deleted every interval at shutdown, ours included.
 */
export class ScheduledInterval {
  private scheduled = false;

  constructor(
    private readonly moduleRef: ModuleRef,
    readonly name: string,
  ) {}

  /** True while the interval is registered by this object. */
  get isScheduled(): boolean {
    return this.scheduled;
  }

  /** Runs `tick` every `ms` (does nothing when already scheduled). */
  schedule(ms: number, tick: () => void): void {
    if (this.scheduled) return;
    this.registry().addInterval(this.name, setInterval(tick, ms));
    this.scheduled = true;
  }

  /** Deletes the interval, if it is still there. */
  unschedule(): void {
    if (!this.scheduled) return;
    const registry = this.registry();
    if (registry.doesExist('interval', this.name)) registry.deleteInterval(this.name);
    this.scheduled = false;
  }

  private registry(): SchedulerRegistry {
    return this.moduleRef.get(SchedulerRegistry, { strict: false });
  }
}
