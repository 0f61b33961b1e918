import { Injectable } from '@nestjs/common';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { matchesEventPattern } from '../model/event-pattern';

/**
 * Supplies consumers that exist for one tenant only (e.g. webhook subscriptions a tenant registered at run
 * time). Every relay instance hosts them; the relay asks once per tenant per round.
 */
export interface TenantConsumerSource {
  consumersForTenant(tenantId: string): Promise<readonly OutboxConsumer[]>;
}

/** The consumers this app hosts, filled once at boot by the explorer. One instance per app: no static state. */
@Injectable()
export class OutboxConsumerRegistry {
  private readonly byName = new Map<string, OutboxConsumer>();
  /** Derived once at load: the relay reads them every round. */
  private derived = {
    names: [] as string[],
    inProcessNames: [] as string[],
    limitedNames: [] as string[],
    hasOrdered: false,
  };
  private readonly tenantSources: TenantConsumerSource[] = [];

  /** Every consumer, in discovery order. */
  consumers(): OutboxConsumer[] {
    return [...this.byName.values()];
  }

  /** The consumers an event with this name is delivered to. */
  consumersFor(eventName: string): OutboxConsumer[] {
    return this.consumers().filter((consumer) =>
      consumer.eventNames.some((pattern) => matchesEventPattern(pattern, eventName)),
    );
  }

  /** The consumer with this name, if this app hosts it. */
  get(name: string): OutboxConsumer | undefined {
    return this.byName.get(name);
  }

  /** Adds a source of tenant-scoped consumers (called by transports at module init). */
  addTenantSource(source: TenantConsumerSource): void {
    this.tenantSources.push(source);
  }

  /** The tenant-scoped consumers of one tenant, from every source. */
  async tenantConsumers(tenantId: string): Promise<OutboxConsumer[]> {
    if (this.tenantSources.length === 0) return [];
    const lists = await Promise.all(this.tenantSources.map((source) => source.consumersForTenant(tenantId)));
    return lists.flat();
  }

  /** Replaces the registry's content; called by the explorer after it checked every consumer. */
  load(consumers: readonly OutboxConsumer[]): void {
    this.byName.clear();
    for (const consumer of consumers) this.byName.set(consumer.name, consumer);
    this.derived = {
      names: consumers.map((c) => c.name),
      inProcessNames: consumers.filter((c) => c.kind === 'handler').map((c) => c.name),
      limitedNames: consumers.filter((c) => c.limits !== undefined).map((c) => c.name),
      hasOrdered: consumers.some((c) => c.ordered === true),
    };
  }

  /** Names of every consumer this app hosts. */
  names(): readonly string[] {
    return this.derived.names;
  }

  /** Names of the in-process (handler) consumers this app hosts. */
  inProcessNames(): readonly string[] {
    return this.derived.inProcessNames;
  }

  /** Names of the consumers this app hosts with a concurrency or rate limit (their claims take turns). */
  limitedNames(): readonly string[] {
    return this.derived.limitedNames;
  }

  /** True when some consumer of this app asked for per-aggregate order. */
  hasOrdered(): boolean {
    return this.derived.hasOrdered;
  }
}
