import type { OutboxBackoffOptions } from '../interfaces/outbox-module-options.interface';
import type { OutboxEvent, OutboxHandlerContext } from '../interfaces/outbox-event.interface';

/** One consumer known to this app: a named handler and the events it listens to. */
export interface OutboxConsumer {
  /** Stable name stored in `outbox_deliveries.consumer_name`. */
  readonly name: string;
  /** Exact event name, `prefix.*`, or `*`. */
  readonly eventName: string;
  /** The class that hosts the handler. */
  readonly hostClass: Function;
  /** The method name. */
  readonly methodName: string;
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  readonly backoff: Required<OutboxBackoffOptions>;
  /** Calls the handler bound to its instance. */
  readonly handle: (event: OutboxEvent, context: OutboxHandlerContext) => unknown;
}
