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
    declaredLimited: [] as string[],
    hasOrdered: false,
  };
  /** The consumers hosted here that the persisted registry gives a limit, as the last heartbeat read them. */
  private limited: readonly string[] = [];
  private readonly tenantSources: TenantConsumerSource[] = [];
  /** A tenant consumer with a limit was handed out (a limited subscription): from then on, as `limitedNames()`. */
  private tenantLimited = false;

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

  /** True when a source of tenant-scoped consumers was added (a transport's: webhooks, brokers). */
  get hasTenantSources(): boolean {
    return this.tenantSources.length > 0;
  }

  /** The tenant-scoped consumers of one tenant, from every source. */
  async tenantConsumers(tenantId: string): Promise<OutboxConsumer[]> {
    if (this.tenantSources.length === 0) return [];
    const lists = await Promise.all(this.tenantSources.map((source) => source.consumersForTenant(tenantId)));
    const consumers = lists.flat();
    if (!this.tenantLimited) this.tenantLimited = consumers.some((c) => c.limits !== undefined);
    return consumers;
  }

  /** Replaces the registry's content; called by the explorer after it checked every consumer. */
  load(consumers: readonly OutboxConsumer[]): void {
    this.byName.clear();
    for (const consumer of consumers) this.byName.set(consumer.name, consumer);
    this.derived = {
      names: consumers.map((c) => c.name),
      inProcessNames: consumers.filter((c) => c.kind === 'handler').map((c) => c.name),
      declaredLimited: consumers.filter((c) => c.limits !== undefined).map((c) => c.name),
      hasOrdered: consumers.some((c) => c.ordered === true),
    };
    this.limited = this.derived.declaredLimited;
  }

  /**
   * Takes the names of the consumers hosted here that the persisted registry gives a limit (each heartbeat reads
   * them): with those this app declares, they are `limitedNames()`. A limit a newer instance declared is thus
   * enforced by this one's claims too (docs/adr/1104-consumer-limits-in-the-database.md, "Amended 2026-12-06").
   */
  learnLimited(names: readonly string[]): void {
    const declared = this.derived.declaredLimited;
    const learned = names.filter((name) => this.byName.has(name) && !declared.includes(name));
    this.limited = learned.length === 0 ? declared : [...declared, ...learned];
  }

  /** Names of every consumer this app hosts. */
  names(): readonly string[] {
    return this.derived.names;
  }

  /** Names of the in-process (handler) consumers this app hosts. */
  inProcessNames(): readonly string[] {
    return this.derived.inProcessNames;
  }

  /**
   * Names of the consumers this app hosts with a concurrency or rate limit, declared here or found in the persisted
   * registry by the last heartbeat (their claims take turns).
   */
  limitedNames(): readonly string[] {
    return this.limited;
  }

  /**
   * True when this app hosts a limited consumer: one of `limitedNames()`, or a tenant's own consumer with a limit
   * handed out since boot (then it stays true: a relay that served one may serve it again at the next round).
   */
  hostsLimited(): boolean {
    return this.limited.length > 0 || this.tenantLimited;
  }

  /** True when some consumer of this app asked for per-aggregate order. */
  hasOrdered(): boolean {
    return this.derived.hasOrdered;
  }
}
