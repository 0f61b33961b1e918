import { Injectable, Logger } from '@nestjs/common';
import type { ExternalDeliveryResult } from '../model/outbox-consumer';
import type { OutboxWebhookCircuitState } from './outbox-webhook-options.interface';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import { WebhookCircuitBreaker } from './webhook-circuit-breaker';
import type { WebhookEndpoint } from './webhook-endpoint';
import { webhookBody } from './webhook-envelope';
import { classifyWebhookResponse, isEndpointFailure, WEBHOOK_ERROR_CODES } from './webhook-outcome';
import { WebhookSender } from './webhook-sender';

/** Extra time a half-open probe gets beyond its request timeout before another probe may go. */
const PROBE_MARGIN_MS = 1000;

/**
 * Delivers events to webhook endpoints (static webhooks and tenant subscriptions alike): builds the wire body,
 * asks the endpoint's circuit breaker, sends, and classifies the answer. Circuit breakers live in memory, one
 * per endpoint per instance: each relay instance learns on its own that an endpoint is down.
 */
@Injectable()
export class OutboxWebhookService {
  private readonly logger = new Logger(OutboxWebhookService.name);
  private readonly circuits = new Map<
    string,
    { endpoint: WebhookEndpoint; breaker: WebhookCircuitBreaker }
  >();

  constructor(private readonly sender: WebhookSender) {}

  /**
   * Delivers one claimed delivery to an endpoint (the `deliver` of webhook consumers). Called with no database
   * transaction open; never throws.
   */
  async deliver(endpoint: WebhookEndpoint, delivery: ClaimedDelivery): Promise<ExternalDeliveryResult> {
    let body: string;
    try {
      body = webhookBody(delivery.event);
    } catch (error) {
      return {
        status: 'dead',
        errorCode: WEBHOOK_ERROR_CODES.malformedPayload,
        error: `event ${delivery.event.eventId} cannot be sent as JSON: ${(error as Error).message}`,
      };
    }
    const breaker = this.breakerOf(endpoint);
    const admission = breaker?.admit() ?? { admitted: true as const, probe: false };
    if (!admission.admitted) {
      return {
        status: 'deferred',
        errorCode: WEBHOOK_ERROR_CODES.circuitOpen,
        error: `circuit of ${endpoint.displayUrl} is open after repeated failures; not sent, retried in ${admission.retryAfterMs} ms`,
        retryAfterMs: admission.retryAfterMs,
      };
    }
    const result = classifyWebhookResponse(
      await this.sender.post(endpoint, delivery, body),
      endpoint.retryOn4xx,
      Date.now(),
      endpoint.responseBodyInErrors,
      endpoint.backoff.capMs,
    );
    if (breaker) {
      const before = breaker.snapshot().state;
      breaker.record(admission, isEndpointFailure(result));
      const after = breaker.snapshot().state;
      if (after === 'open' && before !== 'open') {
        const tenant = endpoint.tenantId ? `, tenant ${endpoint.tenantId}` : '';
        this.logger.warn(
          `circuit of ${endpoint.consumer} (${endpoint.displayUrl}${tenant}) opened: deliveries wait ${endpoint.circuitBreaker!.cooldownMs} ms`,
        );
      } else if (after === 'closed' && before !== 'closed') {
        this.logger.log(`circuit of ${endpoint.consumer} (${endpoint.displayUrl}) closed again`);
      }
    }
    return result;
  }

  /** Every endpoint's circuit on this instance (those that sent at least once), for stats and health checks. */
  circuitStates(): OutboxWebhookCircuitState[] {
    return [...this.circuits.values()].map(({ endpoint, breaker }) => ({
      consumer: endpoint.consumer,
      tenantId: endpoint.tenantId,
      url: endpoint.displayUrl,
      ...breaker.snapshot(),
    }));
  }

  /** Drops an endpoint's circuit (its subscription was removed). */
  forgetEndpoint(key: string): void {
    this.circuits.delete(key);
  }

  private breakerOf(endpoint: WebhookEndpoint): WebhookCircuitBreaker | null {
    if (!endpoint.circuitBreaker) return null;
    const known = this.circuits.get(endpoint.key);
    // A changed endpoint (a subscription edited and re-read) keeps its breaker but reports its new settings.
    if (known) {
      known.endpoint = endpoint;
      return known.breaker;
    }
    const { failureThreshold, cooldownMs } = endpoint.circuitBreaker;
    const breaker = new WebhookCircuitBreaker(
      failureThreshold,
      cooldownMs,
      endpoint.timeoutMs + PROBE_MARGIN_MS,
    );
    this.circuits.set(endpoint.key, { endpoint, breaker });
    return breaker;
  }
}
