import { SetMetadata } from '@nestjs/common';
import { OUTBOX_HANDLER_METADATA } from '../outbox.constants';
import type {
  OnOutboxEventOptions,
  OutboxHandlerMetadata,
} from '../interfaces/outbox-handler-options.interface';

/**
 * Marks a method of a singleton provider as the consumer of `eventName` (an exact name, a prefix like
 * `crm.contact.*`, or `*`). Only records metadata; the module discovers it at boot.
 */
export function OnOutboxEvent(eventName: string, options: OnOutboxEventOptions = {}): MethodDecorator {
  const metadata: OutboxHandlerMetadata = { eventName, options };
  return SetMetadata(OUTBOX_HANDLER_METADATA, metadata);
}
