import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { messages } from '../errors/outbox.messages';
import { countProblem, durationProblem } from '../options/outbox-options';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxEvent } from '../model/outbox-event.interface';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { OutboxExtension } from '../extension/outbox-extension';
import type { OutboxBrokersModuleOptions } from './outbox-brokers-module-options.interface';
import type { OutboxBrokerOptions } from './outbox-broker-options.interface';
import { listOption, OUTBOX_BROKERS_MODULE_OPTIONS } from './outbox-brokers.module-definition';
import { batchConsumer } from './transport-consumer.factory';
import { batchSender } from './transport-batch';
import { entryLabel, resolveExternalConsumer } from './external-consumer-settings';
import { errorText } from '../errors/error-text';
import { DEFAULT_WEBHOOK_CIRCUIT_BREAKER } from '../webhooks/webhook-endpoint';
import { WebhookCircuitBreaker } from '../webhooks/webhook-circuit-breaker';
import { BrokerForwarder, type BrokerPublisher } from './broker-forwarder';
import { displayUrl } from './broker-wait';
import { isRoutingKey, isSubject, natsSettings, rabbitMqSettings } from './broker-settings';
import type { OutboxWebhookCircuitState } from '../webhooks/outbox-webhook-options.interface';
import { RabbitMqPublisher, type AmqpLibLike } from './rabbitmq.publisher';
import { NatsPublisher, type NatsJetStreamLike, type NatsTransportLike } from './nats.publisher';

/** Consumer name of a broker forwarder. */
export function brokerConsumerName(name: string): string {
  return `broker:${name}`;
}

/** Defaults of every forwarder. */
const BROKER_DEFAULTS = { timeoutMs: 10_000, reconnect: { baseMs: 100, capMs: 10_000 } };
/** Beyond its own `timeoutMs`, time a forwarder's batch may take before the relay gives up on it. */
const SEND_MARGIN_MS = 1000;
/** Extra time a half-open probe gets beyond the forwarder's timeout before another probe may go. */
const PROBE_MARGIN_MS = 1000;

/**
 * Turns the module's `brokers` option into forwarders, consumers named `broker:<name>`: checks every entry (problems go
 * to the boot error), loads the client package of each type in use — and only those — and closes the forwarders'
 * connections once the relay has stopped.
 */
@Injectable()
@OutboxExtension()
export class BrokerConsumerFactory implements BeforeApplicationShutdown, OutboxExtension {
  readonly source = 'the brokers option';
  private readonly logger = new Logger(BrokerConsumerFactory.name);
  private readonly forwarders: {
    name: string;
    forwarder: BrokerForwarder;
    address: string;
    breaker: WebhookCircuitBreaker | null;
  }[] = [];
  private closing: Promise<void> | null = null;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_BROKERS_MODULE_OPTIONS) private readonly moduleOptions: OutboxBrokersModuleOptions,
  ) {}

  /** The consumers of the `brokers` option; every problem found is pushed to `problems`. */
  consumers(problems: string[]): OutboxConsumer[] {
    const consumers: OutboxConsumer[] = [];
    const seen = new Map<string, number>();
    const peers = new PeerLoader(problems);
    const brokers = listOption<OutboxBrokerOptions>(this.moduleOptions, 'brokers', problems);
    brokers.forEach((entry, index) => {
      const where = entryLabel('brokers', index, entry);
      if (entry === null || typeof entry !== 'object') {
        problems.push(
          messages.badOption(where, "an object { name, type: 'rabbitmq' | 'nats', events, … }", entry),
        );
        return;
      }
      const before = problems.length;
      const settings = resolveExternalConsumer(
        entry,
        where,
        { option: 'brokers', index, seen },
        this.options,
        BROKER_DEFAULTS.timeoutMs,
        problems,
      );
      const name = brokerConsumerName(String(entry.name));
      const common = {
        consumer: name,
        timeoutMs: settings.timeoutMs,
        reconnect: this.reconnect(entry.reconnect, where, problems),
      };
      const breaker = this.breaker(entry.circuitBreaker, where, settings.timeoutMs, problems);
      let publisher: BrokerPublisher | null = null;
      let destination: { of: (event: OutboxEvent) => string; valid: (value: string) => boolean } | null =
        null;
      const type = (entry as { type?: unknown }).type;
      if (type === 'rabbitmq') {
        const checked = rabbitMqSettings(entry, where, problems);
        destination = { of: checked.routingKey, valid: isRoutingKey };
        const amqp = peers.load<AmqpLibLike>('amqplib', `${where} (type 'rabbitmq')`);
        if (amqp && problems.length === before) {
          publisher = new RabbitMqPublisher(amqp, { ...common, ...checked });
        }
      } else if (type === 'nats') {
        const checked = natsSettings(entry, where, problems);
        destination = { of: checked.subject, valid: isSubject };
        const transport = peers.load<NatsTransportLike>('@nats-io/transport-node', `${where} (type 'nats')`);
        const jetstream = peers.load<NatsJetStreamLike>('@nats-io/jetstream', `${where} (type 'nats')`);
        if (transport && jetstream && problems.length === before) {
          publisher = new NatsPublisher(transport, jetstream, {
            ...common,
            ...checked,
            backoffCapMs: settings.backoff.capMs,
          });
        }
      } else {
        problems.push(messages.badOption(`${where}.type`, '"rabbitmq" or "nats"', type));
      }
      if (!publisher || !destination) return;
      const forwarder = new BrokerForwarder(name, destination.of, destination.valid, publisher, breaker);
      const address =
        type === 'rabbitmq'
          ? displayUrl(String((entry as { url?: unknown }).url))
          : [(entry as { servers?: unknown }).servers].flat().join(', ');
      this.forwarders.push({ name, forwarder, address, breaker });
      const sendTimeoutMs = Math.min(settings.timeoutMs + SEND_MARGIN_MS, this.options.relay.leaseMs - 1);
      consumers.push(
        batchConsumer(name, 'broker', settings, BrokerForwarder, batchSender(forwarder, name, sendTimeoutMs)),
      );
    });
    return consumers;
  }

  /** Every forwarder's circuit on this instance, for stats. */
  circuitStates(): OutboxWebhookCircuitState[] {
    return this.forwarders.flatMap(({ name, address, breaker }) =>
      breaker ? [{ consumer: name, tenantId: null, url: address, ...breaker.snapshot() }] : [],
    );
  }

  /** Closes every forwarder's connection, once, after the relay has stopped. */
  beforeApplicationShutdown(): Promise<void> {
    this.closing ??= Promise.all(
      this.forwarders.map(({ name, forwarder }) =>
        forwarder.close().catch((error) => this.logger.warn(`closing ${name} failed: ${errorText(error)}`)),
      ),
    ).then(() => undefined);
    return this.closing;
  }

  private reconnect(raw: unknown, where: string, problems: string[]): { baseMs: number; capMs: number } {
    if (raw === undefined) return BROKER_DEFAULTS.reconnect;
    if (raw === null || typeof raw !== 'object') {
      problems.push(messages.badOption(`${where}.reconnect`, 'an object { baseMs, capMs }', raw));
      return BROKER_DEFAULTS.reconnect;
    }
    const given = raw as { baseMs?: unknown; capMs?: unknown };
    const reconnect = {
      baseMs: given.baseMs ?? BROKER_DEFAULTS.reconnect.baseMs,
      capMs: given.capMs ?? BROKER_DEFAULTS.reconnect.capMs,
    };
    for (const problem of [
      durationProblem(`${where}.reconnect.baseMs`, reconnect.baseMs),
      durationProblem(`${where}.reconnect.capMs`, reconnect.capMs),
    ])
      if (problem) problems.push(problem);
    return reconnect as { baseMs: number; capMs: number };
  }

  private breaker(
    raw: unknown,
    where: string,
    timeoutMs: number,
    problems: string[],
  ): WebhookCircuitBreaker | null {
    if (raw === false) return null;
    if (raw !== undefined && (raw === null || typeof raw !== 'object')) {
      problems.push(
        messages.badOption(`${where}.circuitBreaker`, 'false or { failureThreshold, cooldownMs }', raw),
      );
      return null;
    }
    const given = (raw ?? {}) as { failureThreshold?: unknown; cooldownMs?: unknown };
    const failureThreshold = given.failureThreshold ?? DEFAULT_WEBHOOK_CIRCUIT_BREAKER.failureThreshold;
    const cooldownMs = given.cooldownMs ?? DEFAULT_WEBHOOK_CIRCUIT_BREAKER.cooldownMs;
    const found = [
      countProblem(`${where}.circuitBreaker.failureThreshold`, failureThreshold),
      durationProblem(`${where}.circuitBreaker.cooldownMs`, cooldownMs),
    ].filter((p): p is string => p !== null);
    problems.push(...found);
    if (found.length > 0) return null;
    return new WebhookCircuitBreaker(
      failureThreshold as number,
      cooldownMs as number,
      timeoutMs + PROBE_MARGIN_MS,
    );
  }
}

/** Loads optional peer packages on demand, once each; a missing one is reported once, naming what needs it. */
class PeerLoader {
  private readonly loaded = new Map<string, unknown>();

  constructor(private readonly problems: string[]) {}

  load<T>(pkg: string, feature: string): T | null {
    if (!this.loaded.has(pkg)) {
      try {
        // Loaded here and only here: an app with no broker of this type never loads the package.
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        this.loaded.set(pkg, require(pkg));
      } catch (error) {
        this.loaded.set(pkg, null);
        const missing = (error as { code?: unknown }).code === 'MODULE_NOT_FOUND';
        this.problems.push(
          missing
            ? messages.missingPeer(feature, pkg)
            : `${feature} needs the package ${pkg}, which failed to load: ${errorText(error)}`,
        );
      }
    }
    return this.loaded.get(pkg) as T | null;
  }
}
