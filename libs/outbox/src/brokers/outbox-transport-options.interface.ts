import type { OnOutboxEventOptions } from '../model/outbox-handler-options.interface';
import type { Type } from '@nestjs/common';
import type { OutboxBackoffOptions } from '../options/outbox-module-options.interface';
import type { OutboxTransport } from '../model/outbox-transport.interface';

/** A transport registered in `OutboxBrokersModule.forRoot({ transports: [ … ] })`. */
export interface OutboxTransportOptions {
  /** Unique name (letters, digits, `_`, `.`, `-`; up to 100). Its consumer is named `transport:<name>`. */
  name: string;
  /** The events it receives: exact names (`crm.contact.created.v1`), prefixes (`crm.contact.*`) or `*`. */
  events: readonly string[];
  /**
   * An object with `send(batch)`, or a class implementing {@link OutboxTransport}: taken from the app's providers
   * when one of them is that class, otherwise instantiated with its constructor's dependencies injected.
   */
  transport: OutboxTransport | Type<OutboxTransport>;
  /**
   * Hand out an aggregate's events in commit order, one in flight per aggregate; a dead delivery blocks its
   * aggregate until replayed. Default: `false`.
   */
  ordered?: boolean;
  /** Time one `send` may take, in ms; must be below `relay.leaseMs`. Default: `OutboxModule`'s `handlerTimeoutMs`. */
  timeoutMs?: number;
  /** Attempts before a delivery is dead. Default: `OutboxModule`'s `maxAttempts`. */
  maxAttempts?: number;
  /** Backoff between attempts; fields left out take `OutboxModule`'s. Default: `OutboxModule`'s `backoff`. */
  backoff?: OutboxBackoffOptions;
  /**
   * At most this many of this transport's deliveries in flight at once, across every relay: `global` over all tenants,
   * `perTenant` in each tenant; either or both, as `@OnOutboxEvent`'s. Deliveries over the cap wait, uncharged.
   * Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no cap.
   */
  concurrency?: OnOutboxEventOptions['concurrency'];
  /**
   * At most `limit` of this transport's deliveries claimed (each one message handed to `send`) in any window of `intervalMs` (sliding), across
   * every relay: over all tenants, or in each tenant with `perTenant: true`, or per key with `perKey`, as
   * `@OnOutboxEvent`'s. Deliveries over the limit wait,
   * uncharged. Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no limit.
   */
  rateLimit?: OnOutboxEventOptions['rateLimit'];
}
