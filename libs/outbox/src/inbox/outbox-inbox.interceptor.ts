import {
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
  type OnModuleInit,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { defer, lastValueFrom, map, throwError, type Observable } from 'rxjs';
import { OutboxConfigurationError, OutboxError } from '../errors/outbox.error';
import { inboxHandlerOf } from './inbox-handler.metadata';
import { inboxMessages } from './inbox.messages';
import { OutboxInbox } from './outbox-inbox.service';
import { attachInboxContext, rpcInboxMessage } from './rpc-inbox-message';

/**
 * Runs an `@EventPattern` handler marked `@InboxHandler(consumer)` through `OutboxInbox.handle`: inside the inbox
 * transaction (the handler reaches it with `@InboxContext()`), once per message, and settles the message with
 * the broker itself (use the RMQ transport with `noAck: false`). A handler's error becomes the message's retry
 * or dead letter, logged by the inbox; it does not reach Nest's exception filters.
 */
@Injectable()
export class OutboxInboxInterceptor implements NestInterceptor, OnModuleInit {
  private inbox: OutboxInbox | null = null;

  constructor(private readonly moduleRef: ModuleRef) {}

  onModuleInit(): void {
    this.inbox = this.resolve();
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const metadata = inboxHandlerOf(context.getHandler());
    if (!metadata) return next.handle();
    const where = `${context.getClass().name}#${context.getHandler().name}`;
    const rpc = context.switchToRpc();
    const rpcContext = rpc.getContext<object>();
    const message = rpcInboxMessage(rpcContext, rpc.getData());
    if (!message) return throwError(() => new OutboxError(inboxMessages.unsupportedTransport(where)));
    const inbox = (this.inbox ??= this.resolve());
    return defer(() =>
      inbox.handle(
        metadata.consumer,
        message,
        (_payload, inboxContext) => {
          attachInboxContext(rpcContext, inboxContext);
          return lastValueFrom(next.handle(), { defaultValue: undefined });
        },
        metadata.options,
      ),
    ).pipe(map(() => undefined));
  }

  private resolve(): OutboxInbox {
    try {
      return this.moduleRef.get(OutboxInbox, { strict: false });
    } catch {
      throw new OutboxConfigurationError([inboxMessages.missingModule('a controller')]);
    }
  }
}
