import { Inject, Injectable } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OUTBOX_WEBHOOKS_RESOLUTION } from './outbox-webhooks.module-definition';
import type { OutboxWebhooksResolution } from './outbox-webhooks-options';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { ExternalDeliveryResult, OutboxConsumer } from '../model/outbox-consumer';
import { OutboxExtension } from '../extension/outbox-extension';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import { resolveWebhookEndpoint, WEBHOOK_NAME_PATTERN, type WebhookEndpoint } from './webhook-endpoint';
import { OutboxWebhookService } from './outbox-webhook.service';
import { consumerLimits } from '../consumers/consumer-limits';

/** Consumer name of a static webhook. */
export function webhookConsumerName(name: string): string {
  return `webhook:${name}`;
}

/**
 * Turns webhooks into consumer records: the static ones of the `webhooks` option (loaded into the registry by
 * the explorer, with their problems reported at boot), and tenant subscriptions (for their consumer source).
 */
@Injectable()
@OutboxExtension()
export class WebhookConsumerFactory implements OutboxExtension {
  readonly source = 'the webhooks option';
  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_WEBHOOKS_RESOLUTION) private readonly resolution: OutboxWebhooksResolution,
    private readonly webhooks: OutboxWebhookService,
  ) {}

  /**
   * The consumers of the `webhooks` option, `webhook:<name>` each; every problem found is pushed to `problems`,
   * with those of the module's other options (the explorer calls this at boot).
   */
  consumers(problems: string[]): OutboxConsumer[] {
    problems.push(...this.resolution.problems);
    const consumers: OutboxConsumer[] = [];
    const seen = new Map<string, number>();
    this.resolution.options.webhooks.forEach((webhook, index) => {
      const where = `webhooks[${index}]${typeof webhook?.name === 'string' ? ` ("${webhook.name}")` : ''}`;
      if (webhook === null || typeof webhook !== 'object') {
        problems.push(messages.badOption(where, 'an object { name, url, events, timeoutMs, … }', webhook));
        return;
      }
      if (typeof webhook.name !== 'string' || !WEBHOOK_NAME_PATTERN.test(webhook.name)) {
        problems.push(
          messages.badOption(`${where}.name`, 'a name of 1 to 100 letters, digits and _ . -', webhook.name),
        );
      } else if (seen.has(webhook.name)) {
        problems.push(messages.duplicateWebhook(webhook.name, seen.get(webhook.name)!, index));
      } else {
        seen.set(webhook.name, index);
      }
      const consumer = webhookConsumerName(String(webhook.name));
      const { endpoint, problems: found } = resolveWebhookEndpoint(webhook, {
        where,
        key: consumer,
        consumer,
        tenantId: null,
        leaseMs: this.options.relay.leaseMs,
        maxAttempts: this.options.maxAttempts,
        backoff: this.options.backoff,
      });
      problems.push(...found.map((p) => p.message));
      // the limits of @OnOutboxEvent, checked by the same code and enforced by the same claims
      const limits = consumerLimits(where, webhook, problems);
      consumers.push({ ...this.toConsumer(endpoint), ...(limits ? { limits } : {}) });
    });
    return consumers;
  }

  /** The consumer record that delivers to an endpoint. */
  toConsumer(
    endpoint: WebhookEndpoint,
    override?: (delivery: ClaimedDelivery) => Promise<ExternalDeliveryResult>,
  ): OutboxConsumer {
    return {
      name: endpoint.consumer,
      kind: 'webhook',
      eventName: endpoint.eventPatterns.join(', '),
      eventNames: endpoint.eventPatterns,
      hostClass: OutboxWebhookService,
      methodName: 'deliver',
      maxAttempts: endpoint.maxAttempts,
      timeoutMs: endpoint.timeoutMs,
      backoff: endpoint.backoff,
      deliver: override ?? ((delivery) => this.webhooks.deliver(endpoint, delivery)),
    };
  }
}
