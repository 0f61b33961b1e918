import { SetMetadata } from '@nestjs/common';
import { OUTBOX_HANDLER_METADATA } from '../model/outbox.constants';
import type { OnOutboxEventOptions, OutboxHandlerMetadata } from '../model/outbox-handler-options.interface';
import type { OutboxEventPattern, OutboxHandlerFor } from '../model/outbox-event-map.interface';

/** The decorator `@OnOutboxEvent(pattern)` returns: it accepts only methods that can take the pattern's events. */
export type OutboxHandlerDecorator<TPattern extends string> = <THandler extends OutboxHandlerFor<TPattern>>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<THandler>,
) => void;

/**
 * Marks a method of a singleton provider as the consumer of `eventName` (an exact name, a prefix like
 * `crm.contact.*`, or `*`). Only records metadata; the module discovers it at boot. For a name declared in
 * `OutboxEventMap`, the method's first parameter must accept `OutboxEventOf<typeof eventName>`.
 */
export function OnOutboxEvent<const TPattern extends OutboxEventPattern>(
  eventName: TPattern,
  options: OnOutboxEventOptions = {},
): OutboxHandlerDecorator<TPattern> {
  const metadata: OutboxHandlerMetadata = { eventName, options };
  const decorator = SetMetadata(OUTBOX_HANDLER_METADATA, metadata);
  return (target, propertyKey, descriptor) => {
    decorator(target, propertyKey, descriptor);
  };
}
