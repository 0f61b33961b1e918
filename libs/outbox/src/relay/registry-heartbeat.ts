import { Logger } from '@nestjs/common';
import { errorText } from '../errors/error-text';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxConsumerRegistry } from '../consumers/outbox-consumer.registry';
import type { Clock } from '../model/clock';
import type { OutboxStorePort } from '../store/outbox-store.port';
import { RELAY_LOG_CONTEXT } from '../batch/tenant-batch';

/**
 * This instance's entry in the persisted registry: which consumers it hosts, so that fan-out (on any instance)
 * creates their delivery rows, and which of them have limits there (the newest instance's). Refreshed at bootstrap, then before a round once `registry.heartbeatMs` passed;
 * left at shutdown. Why a persisted registry: docs/adr/0608-persisted-consumer-registry.md.
 */
export class RegistryHeartbeat {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  /** When this instance last beat (the clock's time), or null before its first beat. */
  private last: number | null = null;
  /**
   * When this instance started, by the database's clock (its first beat; null before): a later one's limits win in
   * the registry.
   */
  private startedAt: Date | null = null;

  constructor(
    private readonly instanceId: string,
    private readonly options: ResolvedOutboxOptions,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStorePort,
    private readonly clock: Clock,
  ) {}

  /**
   * Records that this instance hosts its consumers now, and learns which of them the registry gives a limit —
   * declared here or by a newer instance: this relay's claims enforce those too.
   */
  async beat(): Promise<void> {
    const consumers = this.registry.consumers();
    if (consumers.length > 0) {
      const { instanceId } = this;
      const beat = await this.store.heartbeat({ instanceId, startedAt: this.startedAt, consumers });
      this.startedAt = beat.startedAt;
      this.registry.learnLimited(beat.limited);
    }
    this.last = this.clock.now();
  }

  /** True when the last beat is `registry.heartbeatMs` old, or before the first one. */
  get isDue(): boolean {
    return this.last === null || this.clock.now() - this.last >= this.options.registry.heartbeatMs;
  }

  /** Removes this instance from the registry's host lists, if it ever joined them; never throws (logs). */
  async leave(): Promise<void> {
    if (this.last === null) return;
    await this.store
      .leaveRegistry({ instanceId: this.instanceId })
      .catch((error) => this.logger.warn(`could not leave the registry: ${errorText(error)}`));
  }
}
