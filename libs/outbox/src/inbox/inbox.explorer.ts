import { Injectable, Logger } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { inboxHandlerOf } from './inbox-handler.metadata';
import { inboxMessages } from './inbox.messages';
import { consumerProblem, maxDeliveriesProblem } from './outbox-inbox-options';

/**
 * Finds the `@InboxHandler` methods of the app's controllers at boot: logs one line per consumer and returns the
 * wiring problems (bad names or options, one consumer name on two methods).
 */
@Injectable()
export class InboxExplorer {
  private readonly logger = new Logger(InboxExplorer.name);

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  problems(): string[] {
    const problems: string[] = [];
    const hosts = new Map<string, string[]>();
    for (const wrapper of this.discovery.getControllers()) {
      const instance = wrapper.instance as object | undefined;
      const type = (instance?.constructor ?? wrapper.metatype) as { name: string; prototype: object } | null;
      if (!type?.prototype) continue;
      for (const method of this.scanner.getAllMethodNames(type.prototype)) {
        const metadata = inboxHandlerOf((type.prototype as Record<string, unknown>)[method]);
        if (!metadata) continue;
        const where = `@InboxHandler on ${type.name}#${method}`;
        const problem =
          consumerProblem(where, metadata.consumer) ??
          (metadata.options.maxDeliveries === undefined
            ? null
            : maxDeliveriesProblem(where, metadata.options.maxDeliveries));
        if (problem) {
          problems.push(problem);
          continue;
        }
        hosts.set(metadata.consumer, [...(hosts.get(metadata.consumer) ?? []), `${type.name}#${method}`]);
      }
    }
    for (const [consumer, at] of hosts) {
      if (at.length > 1) problems.push(inboxMessages.sharedConsumer(consumer, at));
      else this.logger.log(`inbox ${consumer} -> ${at[0]}`);
    }
    return problems;
  }
}
