import { Logger } from '@nestjs/common';
import type { OutboxEvent } from '../model/outbox-event.interface';
import type {
  OutboxTransport,
  OutboxTransportBatch,
  OutboxTransportDelivery,
  OutboxTransportOutcome,
} from '../model/outbox-transport.interface';
import { errorText } from '../errors/error-text';
import { type WebhookCircuitBreaker } from '../webhooks/webhook-circuit-breaker';
import { webhookBody } from '../webhooks/webhook-envelope';
import { BROKER_ERROR_CODES } from './broker-error-codes';
import { brokerHeaders } from './broker-headers';
import { BrokerUnavailableError } from './broker-link';

/** A message ready to publish: the wire body (the webhook envelope), its headers and destination. */
export interface BrokerMessage {
  readonly delivery: OutboxTransportDelivery;
  readonly eventId: string;
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>>;
  /** The routing key (RabbitMQ) or subject (NATS). */
  readonly destination: string;
}

/** What a forwarder publishes through: one connection, reopened with backoff. */
export interface BrokerPublisher {
  /**
   * Publishes every message with their acknowledgements in flight together, and says what became of each;
   * waits at most `timeoutMs` for them. Throws {@link BrokerUnavailableError} when nothing could be sent.
   */
  publish(messages: readonly BrokerMessage[], signal: AbortSignal): Promise<OutboxTransportOutcome[]>;
  close(): Promise<void>;
}

/** Codes that count as the broker failing, for the circuit breaker. */
const BROKER_FAILURES: ReadonlySet<string> = new Set([
  BROKER_ERROR_CODES.connectionLost,
  BROKER_ERROR_CODES.publishTimeout,
]);

/**
 * The transport of a `brokers` entry: turns each delivery into a message (the webhook envelope as body, the
 * outbox headers, the destination from `routingKey`/`subject`), asks the circuit breaker, and publishes the rest
 * of the batch at once. A delivery that cannot become a message is dead at once; the others get the
 * publisher's outcome.
 */
export class BrokerForwarder implements OutboxTransport {
  private readonly logger = new Logger(BrokerForwarder.name);

  constructor(
    private readonly consumer: string,
    private readonly destinationOf: (event: OutboxEvent) => string,
    private readonly isDestination: (value: string) => boolean,
    private readonly publisher: BrokerPublisher,
    private readonly breaker: WebhookCircuitBreaker | null,
  ) {}

  async send(batch: OutboxTransportBatch): Promise<OutboxTransportOutcome[]> {
    const outcomes = new Array<OutboxTransportOutcome>(batch.deliveries.length);
    const messages: BrokerMessage[] = [];
    const at: number[] = [];
    batch.deliveries.forEach((delivery, index) => {
      const message = this.message(delivery);
      if ('status' in message) outcomes[index] = message;
      else {
        messages.push(message);
        at.push(index);
      }
    });
    if (messages.length === 0) return outcomes;
    const admission = this.breaker?.admit() ?? { admitted: true as const, probe: false };
    if (!admission.admitted) {
      const error = `circuit of ${this.consumer} is open after repeated failures; not sent, retried in ${admission.retryAfterMs} ms`;
      for (const index of at)
        outcomes[index] = {
          status: 'deferred',
          errorCode: BROKER_ERROR_CODES.circuitOpen,
          error,
          retryAfterMs: admission.retryAfterMs,
        };
      return outcomes;
    }
    let published: OutboxTransportOutcome[];
    try {
      published = await this.publisher.publish(messages, batch.signal);
    } catch (error) {
      const unavailable = error instanceof BrokerUnavailableError ? error : null;
      const outcome: OutboxTransportOutcome = {
        status: 'deferred',
        errorCode: BROKER_ERROR_CODES.brokerUnavailable,
        error: unavailable ? unavailable.message : `${this.consumer} could not publish: ${errorText(error)}`,
        retryAfterMs: unavailable?.retryAfterMs ?? 1000,
      };
      for (const index of at) outcomes[index] = outcome;
      return outcomes;
    }
    at.forEach((index, i) => (outcomes[index] = published[i]!));
    this.record(admission, published);
    return outcomes;
  }

  close(): Promise<void> {
    return this.publisher.close();
  }

  /** The delivery's message, or its outcome when it cannot become one. */
  private message(delivery: OutboxTransportDelivery): BrokerMessage | OutboxTransportOutcome {
    const { event } = delivery;
    let body: string;
    try {
      body = webhookBody(event);
    } catch (error) {
      return {
        status: 'dead',
        errorCode: BROKER_ERROR_CODES.malformedPayload,
        error: `event ${event.eventId} cannot be sent as JSON: ${(error as Error).message}`,
      };
    }
    let destination: unknown;
    try {
      destination = this.destinationOf(event);
    } catch (error) {
      destination = error;
    }
    if (typeof destination !== 'string' || !this.isDestination(destination)) {
      return {
        status: 'dead',
        errorCode: BROKER_ERROR_CODES.badDestination,
        error: `${this.consumer} has no destination for event ${event.eventId} (${event.eventName}): ${
          destination instanceof Error
            ? errorText(destination)
            : `got ${JSON.stringify(String(destination)).slice(0, 80)}`
        }`,
      };
    }
    return {
      delivery,
      eventId: event.eventId,
      body: Buffer.from(body),
      headers: brokerHeaders(delivery),
      destination,
    };
  }

  /** Tells the breaker how the batch went: any timeout or lost connection counts as one failure. */
  private record(admission: { probe: boolean }, published: readonly OutboxTransportOutcome[]): void {
    if (!this.breaker) return;
    const failed = published.some((o) => o.status === 'failed' && BROKER_FAILURES.has(o.errorCode));
    const before = this.breaker.snapshot().state;
    this.breaker.record(admission, failed);
    const after = this.breaker.snapshot().state;
    if (after === 'open' && before !== 'open') this.logger.warn(`circuit of ${this.consumer} opened`);
    else if (after === 'closed' && before !== 'closed')
      this.logger.log(`circuit of ${this.consumer} closed again`);
  }
}
