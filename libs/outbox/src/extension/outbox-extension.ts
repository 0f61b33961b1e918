import { DiscoveryService } from '@nestjs/core';
import type { OutboxConsumer } from '../model/outbox-consumer';

/**
 * A feature that plugs consumers into the outbox (webhooks, transports, brokers): a singleton provider of any
 * module, marked `@OutboxExtension()`. At boot the explorer loads its consumers with the `@OnOutboxEvent` ones,
 * checked in the same pass: every problem of every source fails `app.init()` in one error.
 */
export interface OutboxExtension {
  /** Where the consumers come from, as boot errors name it (e.g. `the webhooks option`). */
  readonly source: string;
  /** The consumers this extension adds; a problem found is pushed to `problems`, not thrown. */
  consumers?(problems: string[]): readonly OutboxConsumer[] | Promise<readonly OutboxConsumer[]>;
}

/** Marks a provider class as an {@link OutboxExtension} that the explorer finds at boot. */
export const OutboxExtension = DiscoveryService.createDecorator<void>();
