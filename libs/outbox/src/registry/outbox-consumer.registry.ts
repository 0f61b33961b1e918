import { Injectable } from '@nestjs/common';
import type { OutboxConsumer } from './outbox-consumer';
import { matchesEventPattern } from './event-pattern';

/** The consumers this app hosts, filled once at boot by the explorer. One instance per app: no static state. */
@Injectable()
export class OutboxConsumerRegistry {
  private readonly byName = new Map<string, OutboxConsumer>();

  /** Every consumer, in discovery order. */
  consumers(): OutboxConsumer[] {
    return [...this.byName.values()];
  }

  /** The consumers an event with this name is delivered to. */
  consumersFor(eventName: string): OutboxConsumer[] {
    return this.consumers().filter((consumer) => matchesEventPattern(consumer.eventName, eventName));
  }

  /** The consumer with this name, if this app hosts it. */
  get(name: string): OutboxConsumer | undefined {
    return this.byName.get(name);
  }

  /** Replaces the registry's content; called by the explorer after it checked every consumer. */
  load(consumers: readonly OutboxConsumer[]): void {
    this.byName.clear();
    for (const consumer of consumers) this.byName.set(consumer.name, consumer);
  }
}
