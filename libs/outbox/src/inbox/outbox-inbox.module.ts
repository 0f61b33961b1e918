import { Inject, Module, Optional, type DynamicModule, type OnModuleInit } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { InboxExplorer } from './inbox.explorer';
import { inboxMessages } from './inbox.messages';
import { OUTBOX_INBOX_OPTIONS, resolveInboxOptions } from './outbox-inbox-options';
import type { OutboxInboxModuleOptions } from './outbox-inbox-options.interface';
import { OutboxInbox } from './outbox-inbox.service';

const OPTION_PROBLEMS = Symbol('OUTBOX_INBOX_OPTION_PROBLEMS');

/**
 * The inbox of messages from a broker: `OutboxInbox` for apps on amqplib or the NATS client, and what
 * `@InboxHandler` needs on Nest microservice handlers. Import next to `OutboxModule.forRoot(…)`:
 * `OutboxInboxModule.forRoot({ maxDeliveries: 5 })`; global unless `isGlobal: false`. Needs the migrations
 * `OutboxInbox1764500300000` and `OutboxInboxTenantKey1764500400000` (in `outboxMigrations`). Loads no broker
 * client. See docs/inbox.md.
 */
@Module({})
export class OutboxInboxModule implements OnModuleInit {
  constructor(
    @Inject(OPTION_PROBLEMS) private readonly optionProblems: readonly string[],
    private readonly explorer: InboxExplorer,
    @Optional() @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly outbox?: ResolvedOutboxOptions,
  ) {}

  /** `OutboxInbox`, with the module's defaults for every consumer. */
  static forRoot(options: OutboxInboxModuleOptions = {}): DynamicModule {
    const { options: resolved, problems } = resolveInboxOptions(options);
    return {
      module: OutboxInboxModule,
      global: options.isGlobal !== false,
      imports: [DiscoveryModule],
      providers: [
        { provide: OUTBOX_INBOX_OPTIONS, useValue: resolved },
        { provide: OPTION_PROBLEMS, useValue: problems },
        OutboxInbox,
        InboxExplorer,
      ],
      exports: [OutboxInbox],
    };
  }

  onModuleInit(): void {
    const problems = [...this.optionProblems];
    if (!this.outbox) problems.push(inboxMessages.missingOutbox());
    problems.push(...this.explorer.problems());
    if (problems.length > 0) throw new OutboxConfigurationError(problems);
  }
}
