import { Inject, Injectable, Logger, OnModuleInit, type Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef, Reflector } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { OUTBOX_HANDLER_METADATA } from '../model/outbox.constants';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import {
  backoffProblems,
  countProblem,
  durationProblem,
  type OptionsResolution,
} from '../options/outbox-options';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxHandlerMetadata } from '../model/outbox-handler-options.interface';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { DEFAULT_MAX_SNOOZES } from '../model/delivery-outcome';
import { OutboxConsumerRegistry } from './outbox-consumer.registry';
import { isEventPattern } from '../model/event-pattern';
import { OutboxExtension } from '../extension/outbox-extension';
import { OutboxStore } from '../store/outbox.store';
import { OUTBOX_OPTIONS_RESOLUTION } from '../options/outbox-options.provider';
import { OutboxSchemaRegistry } from '../events/outbox-schema.registry';
import { receiptValidated } from '../events/receipt-validation';
import { consumerLimits } from './consumer-limits';
import { AmbientTransactions } from '../cls/ambient-transactions';

/**
 * Finds every `@OnOutboxEvent` method on the app's singleton providers and controllers, checks the wiring
 * (options, DataSource, scheduler, consumer names and scopes), and loads the registry. Every problem found is
 * reported in one error, so `app.init()` fails once with the whole list.
 */
@Injectable()
export class OutboxExplorer implements OnModuleInit {
  private readonly logger = new Logger(OutboxExplorer.name);

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly moduleRef: ModuleRef,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStore,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_OPTIONS_RESOLUTION) private readonly resolution: OptionsResolution,
    private readonly schemas: OutboxSchemaRegistry,
    private readonly ambient: AmbientTransactions,
  ) {}

  async onModuleInit(): Promise<void> {
    const problems = [
      ...this.resolution.problems,
      ...this.wiringProblems(),
      ...this.schemas.problems(),
      ...this.ambient.problems(),
    ];
    const consumers = this.discover(problems);
    // The extensions' consumers (static webhooks, transports and brokers: webhook:<name>, transport:<name>,
    // broker:<name>) are checked in the same pass, against the handlers' names and each other's.
    const taken = new Map(consumers.map((c) => [c.name, `${c.hostClass.name}#${c.methodName}`]));
    for (const extension of this.extensions(problems)) {
      const list = (await extension.consumers?.(problems)) ?? [];
      for (const consumer of list) {
        const clash = taken.get(consumer.name);
        if (clash !== undefined)
          problems.push(messages.duplicateConsumer(consumer.name, [clash, extension.source]));
        consumers.push(consumer);
      }
      for (const consumer of list) if (!taken.has(consumer.name)) taken.set(consumer.name, extension.source);
    }
    if (problems.length > 0) throw new OutboxConfigurationError(problems);
    this.registry.load(consumers);
    for (const c of consumers)
      this.logger.log(`${c.eventName} -> ${c.hostClass.name}#${c.methodName} (consumer "${c.name}")`);
  }

  private wiringProblems(): string[] {
    const problems: string[] = [];
    try {
      this.store.dataSource();
    } catch (error) {
      problems.push((error as Error).message);
    }
    if (this.options.relay.enabled) {
      try {
        this.moduleRef.get(SchedulerRegistry, { strict: false });
      } catch {
        problems.push(messages.missingScheduler());
      }
    }
    return problems;
  }

  /** The providers marked `@OutboxExtension()`, in discovery order; they must be singletons. */
  private extensions(problems: string[]): OutboxExtension[] {
    const found: OutboxExtension[] = [];
    // Read from each provider's class, not from `getProviders({ metadataKey })`: Nest 11's index keeps one
    // discoverable decorator per class, so a class with another one would be missed.
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as object | null | undefined;
      const type = (instance?.constructor ?? wrapper.metatype) as Type | undefined;
      if (typeof type !== 'function' || this.reflector.get(OutboxExtension.KEY, type) === undefined) continue;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient)
        problems.push(messages.requestScoped(type.name));
      else if (instance) found.push(instance as OutboxExtension);
    }
    return found;
  }

  private discover(problems: string[]): OutboxConsumer[] {
    const found: OutboxConsumer[] = [];
    const hostsByName = new Map<string, string[]>();
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    for (const wrapper of wrappers) {
      const instance = wrapper.instance as object | null | undefined;
      const type = (instance?.constructor ?? wrapper.metatype) as Type | undefined;
      if (!type?.prototype || typeof type !== 'function') continue;
      const prototype = type.prototype as Record<string, (...args: never[]) => unknown>;
      for (const methodName of this.scanner.getAllMethodNames(prototype)) {
        const metadata = this.reflector.get<OutboxHandlerMetadata | undefined>(
          OUTBOX_HANDLER_METADATA,
          prototype[methodName],
        );
        if (!metadata) continue;
        const host = `${type.name}#${methodName}`;
        const consumer = this.toConsumer(wrapper, type, methodName, metadata, host, problems);
        const hosts = hostsByName.get(consumer.name) ?? [];
        hosts.push(host);
        hostsByName.set(consumer.name, hosts);
        found.push(consumer);
      }
    }
    for (const [name, hosts] of hostsByName) {
      if (hosts.length > 1) problems.push(messages.duplicateConsumer(name, hosts));
    }
    return found;
  }

  private toConsumer(
    wrapper: InstanceWrapper,
    type: Type,
    methodName: string,
    metadata: OutboxHandlerMetadata,
    host: string,
    problems: string[],
  ): OutboxConsumer {
    const { options } = metadata;
    if (!isEventPattern(metadata.eventName))
      problems.push(messages.badPattern(`@OnOutboxEvent on ${host}`, metadata.eventName));
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient)
      problems.push(messages.requestScoped(type.name));
    const name = options.consumer ?? `${type.name}.${methodName}`;
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.:@/-]{1,200}$/.test(name)) {
      problems.push(
        messages.badOption(`consumer of ${host}`, 'a name of 1 to 200 letters, digits and _ . : @ / -', name),
      );
    }
    const maxAttempts = options.maxAttempts ?? this.options.maxAttempts;
    const maxSnoozes = options.maxSnoozes ?? DEFAULT_MAX_SNOOZES;
    const timeoutMs = options.timeoutMs ?? this.options.handlerTimeoutMs;
    const leaseMs = this.options.relay.leaseMs;
    for (const problem of [
      countProblem(`maxAttempts of ${host}`, maxAttempts),
      countProblem(`maxSnoozes of ${host}`, maxSnoozes, 'every snooze is charged as a failed attempt'),
      durationProblem(`timeoutMs of ${host}`, timeoutMs, { below: { name: 'relay.leaseMs', ms: leaseMs } }),
    ])
      if (problem) problems.push(problem);
    const backoff = { ...this.options.backoff, ...options.backoff };
    problems.push(...backoffProblems(`backoff of ${host}`, backoff));
    const startFrom = options.startFrom ?? 'registration';
    const startProblem = startFromProblem(startFrom);
    if (startProblem) problems.push(messages.badOption(`startFrom of ${host}`, startProblem, startFrom));
    const limits = consumerLimits(host, options, problems);
    const instance = wrapper.instance as Record<string, (...args: unknown[]) => unknown> | undefined;
    let handle: NonNullable<OutboxConsumer['handle']> = (event, context) =>
      instance![methodName]!(event, context);
    if (options.validatePayload === true) {
      if (!this.schemas.covers(metadata.eventName))
        problems.push(messages.validateWithoutSchema(host, metadata.eventName));
      handle = receiptValidated(this.schemas, handle);
    }
    // outermost: the TransactionHost's tx is the delivery's from the first line the wrappers run
    handle = this.ambient.bound(handle);
    return {
      name,
      kind: 'handler',
      eventName: metadata.eventName,
      eventNames: [metadata.eventName],
      ordered: options.ordered === true,
      startFrom,
      ...(limits ? { limits } : {}),
      hostClass: type,
      methodName,
      maxAttempts,
      maxSnoozes,
      timeoutMs,
      backoff,
      handle,
    };
  }
}

/** What is wrong with a `startFrom`, or null: 'registration', 'oldest', or a valid Date not in the future. */
function startFromProblem(value: unknown): string | null {
  if (value === 'registration' || value === 'oldest') return null;
  const expected = "'registration' (the default), 'oldest', or a Date in the past";
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) return expected;
  return value.getTime() > Date.now() ? `${expected} (a consumer cannot start in the future)` : null;
}
