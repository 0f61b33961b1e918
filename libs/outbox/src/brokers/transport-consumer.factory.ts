import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { messages } from '../errors/outbox.messages';
import { errorText } from '../errors/error-text';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { OutboxExtension } from '../extension/outbox-extension';
import type { OutboxTransport } from '../model/outbox-transport.interface';
import type { OutboxTransportOptions } from './outbox-transport-options.interface';
import type { OutboxBrokersModuleOptions } from './outbox-brokers-module-options.interface';
import { listOption, OUTBOX_BROKERS_MODULE_OPTIONS } from './outbox-brokers.module-definition';
import { batchSender } from './transport-batch';
import {
  entryLabel,
  resolveExternalConsumer,
  type ExternalConsumerSettings,
} from './external-consumer-settings';

/** Consumer name of a transport. */
export function transportConsumerName(name: string): string {
  return `transport:${name}`;
}

/**
 * Turns the module's `transports` option into consumers named `transport:<name>` (loaded into the registry by the
 * explorer, their problems reported at boot), and closes every transport once the relay has stopped.
 */
@Injectable()
@OutboxExtension()
export class TransportConsumerFactory implements BeforeApplicationShutdown, OutboxExtension {
  readonly source = 'the transports option';
  private readonly logger = new Logger(TransportConsumerFactory.name);
  private readonly opened: { name: string; transport: OutboxTransport }[] = [];
  private closing: Promise<void> | null = null;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_BROKERS_MODULE_OPTIONS) private readonly moduleOptions: OutboxBrokersModuleOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** The consumers of the `transports` option; every problem found is pushed to `problems`. */
  async consumers(problems: string[]): Promise<OutboxConsumer[]> {
    const consumers: OutboxConsumer[] = [];
    const seen = new Map<string, number>();
    const transports = listOption<OutboxTransportOptions>(this.moduleOptions, 'transports', problems);
    for (const [index, entry] of transports.entries()) {
      const where = entryLabel('transports', index, entry);
      if (entry === null || typeof entry !== 'object') {
        problems.push(messages.badOption(where, 'an object { name, events, transport }', entry));
        continue;
      }
      const settings = resolveExternalConsumer(
        entry,
        where,
        { option: 'transports', index, seen },
        this.options,
        this.options.handlerTimeoutMs,
        problems,
      );
      const transport = await this.resolve(entry.transport, `${where}.transport`, problems);
      if (!transport) continue;
      const name = transportConsumerName(String(entry.name));
      this.opened.push({ name, transport });
      consumers.push(
        batchConsumer(
          name,
          'transport',
          settings,
          transport.constructor as Type,
          batchSender(transport, name, settings.timeoutMs),
        ),
      );
    }
    return consumers;
  }

  /** Closes every transport, once (concurrent callers share the promise), after the relay has stopped. */
  beforeApplicationShutdown(): Promise<void> {
    this.closing ??= Promise.all(
      this.opened.map(async ({ name, transport }) => {
        try {
          await transport.close?.();
        } catch (error) {
          this.logger.warn(`closing ${name} failed: ${errorText(error)}`);
        }
      }),
    ).then(() => undefined);
    return this.closing;
  }

  /** An instance as is; a class from the app's providers, or created with its dependencies injected. */
  private async resolve(
    given: OutboxTransportOptions['transport'] | undefined,
    field: string,
    problems: string[],
  ): Promise<OutboxTransport | null> {
    if (typeof given === 'function') {
      const type = given as Type<OutboxTransport>;
      if (typeof (type.prototype as Partial<OutboxTransport> | undefined)?.send !== 'function') {
        problems.push(
          messages.badTransport(field, `the class ${type.name || '(anonymous)'} has no send method`),
        );
        return null;
      }
      try {
        return this.moduleRef.get(type, { strict: false });
      } catch {
        // not one of the app's providers: made here, with its constructor's dependencies
      }
      try {
        return await this.moduleRef.create(type);
      } catch (error) {
        problems.push(messages.badTransport(field, `creating ${type.name} failed: ${errorText(error)}`));
        return null;
      }
    }
    if (
      given === null ||
      typeof given !== 'object' ||
      typeof (given as OutboxTransport).send !== 'function'
    ) {
      problems.push(
        messages.badTransport(field, 'it is neither an object with send(batch) nor such a class'),
      );
      return null;
    }
    return given as OutboxTransport;
  }
}

/** The consumer record of a batch consumer (a transport or a broker forwarder). */
export function batchConsumer(
  name: string,
  kind: 'transport' | 'broker',
  settings: ExternalConsumerSettings,
  hostClass: Type,
  deliverBatch: NonNullable<OutboxConsumer['deliverBatch']>,
): OutboxConsumer {
  return {
    name,
    kind,
    eventName: settings.eventPatterns.join(', '),
    eventNames: settings.eventPatterns,
    ordered: settings.ordered,
    ...(settings.limits ? { limits: settings.limits } : {}),
    hostClass,
    methodName: 'send',
    maxAttempts: settings.maxAttempts,
    timeoutMs: settings.timeoutMs,
    backoff: settings.backoff,
    deliverBatch,
  };
}
