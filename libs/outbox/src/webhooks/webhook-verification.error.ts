import { OutboxError } from '../errors/outbox.error';

/** Why `verifyWebhook()` refused a request. */
export type WebhookVerificationFailure =
  'missingHeaders' | 'badTimestamp' | 'staleTimestamp' | 'badSignature' | 'badBody';

/** `verifyWebhook()` refused a request: answer it with 400 (or 401) and do not process it. */
export class OutboxWebhookVerificationError extends OutboxError {
  constructor(
    /** Which check failed. */
    readonly reason: WebhookVerificationFailure,
    message: string,
  ) {
    super(message);
  }
}
