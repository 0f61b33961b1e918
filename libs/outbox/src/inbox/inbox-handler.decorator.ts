import {
  SetMetadata,
  UseInterceptors,
  applyDecorators,
  createParamDecorator,
  type ExecutionContext,
} from '@nestjs/common';
import { OutboxError } from '../errors/outbox.error';
import { OUTBOX_INBOX_HANDLER_METADATA, type InboxHandlerMetadata } from './inbox-handler.metadata';
import { inboxMessages } from './inbox.messages';
import { OutboxInboxInterceptor } from './outbox-inbox.interceptor';
import type { OutboxInboxConsumerOptions, OutboxInboxContext } from './outbox-inbox.interfaces';
import { inboxContextOf } from './rpc-inbox-message';

/**
 * Runs an `@EventPattern` handler of a Nest microservice (RabbitMQ or NATS transport) through the inbox as
 * `consumer`: once per message, in the inbox transaction (take it with `@InboxContext()`), the message settled
 * by the inbox. Needs `OutboxInboxModule.forRoot()`.
 */
export function InboxHandler(consumer: string, options: OutboxInboxConsumerOptions = {}): MethodDecorator {
  const metadata: InboxHandlerMetadata = { consumer, options };
  return applyDecorators(
    SetMetadata(OUTBOX_INBOX_HANDLER_METADATA, metadata),
    UseInterceptors(OutboxInboxInterceptor),
  );
}

/**
 * The `OutboxInboxContext` of the message an `@InboxHandler` method is processing: `manager` is the inbox
 * transaction's EntityManager, plus the message id, tenant, event name and delivery number.
 */
export const InboxContext: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext): OutboxInboxContext => {
    const inboxContext = inboxContextOf(context.switchToRpc().getContext());
    if (!inboxContext) throw new OutboxError(inboxMessages.noInboxContext());
    return inboxContext;
  },
);
