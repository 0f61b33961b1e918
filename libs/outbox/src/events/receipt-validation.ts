import type { OutboxConsumer } from '../model/outbox-consumer';
import type { OutboxSchemaRegistry } from './outbox-schema.registry';

type Handle = NonNullable<OutboxConsumer['handle']>;

/**
 * Wraps a consumer's handler so that it receives only payloads its schema accepts (as the schema's output); a
 * rejected one throws `OutboxInvalidPayloadError` before the handler runs, which the dispatcher dead-letters.
 * With a synchronous schema, the handler is called in the same tick, as without the wrapper.
 */
export function receiptValidated(schemas: OutboxSchemaRegistry, handle: Handle): Handle {
  return (event, context) => {
    const checked = schemas.checkOnReceipt(event);
    return checked instanceof Promise
      ? checked.then((valid) => handle(valid, context))
      : handle(checked, context);
  };
}
