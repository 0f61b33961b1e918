import type { ExternalDeliveryResult, OutboxConsumer } from '../model/outbox-consumer';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import { errorText } from '../errors/error-text';
import { MAX_DURATION_MS } from '../options/outbox-options';
import type { OutboxTransport, OutboxTransportBatch } from '../model/outbox-transport.interface';

/** Error codes the outbox gives a transport's deliveries (the transport's own codes come on top). */
export const TRANSPORT_ERROR_CODES = {
  /** `send` rejected, or its outcome for this delivery is missing or malformed. Retried. */
  transportError: 'transportError',
  /** `send` did not settle within the consumer's `timeoutMs`. Retried. */
  timeout: 'timeout',
} as const;

/** Longest error text kept from a transport's outcome (the stored error is bounded again). */
const MAX_CODE_LENGTH = 100;

/**
 * The `deliverBatch` of a transport's consumer: builds the batch, bounds `send` by `timeoutMs` (then aborts its
 * signal and fails every delivery with `timeout`), and checks each outcome it returns. Never throws.
 */
export function batchSender(
  transport: OutboxTransport,
  consumer: string,
  timeoutMs: number,
): NonNullable<OutboxConsumer['deliverBatch']> {
  return async (deliveries, headers) => {
    const controller = new AbortController();
    const batch: OutboxTransportBatch = {
      consumer,
      tenantId: deliveries[0]?.tenantId ?? '',
      deliveries: deliveries.map((delivery, i) => ({
        event: delivery.event,
        attempt: delivery.attempt,
        headers: headers[i] ?? {},
      })),
      signal: controller.signal,
    };
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const answer = await Promise.race([
        Promise.resolve()
          .then(() => transport.send(batch))
          .then(
            (outcomes) => ({ outcomes }),
            (error: unknown) => ({ error }),
          ),
        timedOut,
      ]);
      if (answer === 'timeout') {
        controller.abort(new Error(`${consumer}: send did not settle within ${timeoutMs} ms`));
        return deliveries.map(() => ({
          status: 'failed' as const,
          errorCode: TRANSPORT_ERROR_CODES.timeout,
          error: `${consumer} did not settle its batch of ${deliveries.length} within ${timeoutMs} ms; whether the remote side took it is unknown`,
        }));
      }
      if ('error' in answer) {
        const error = `${consumer} failed its batch: ${errorText(answer.error)}`;
        return deliveries.map(() => transportError(error));
      }
      return deliveries.map((delivery, i) => checkedOutcome(answer.outcomes, i, delivery, consumer));
    } finally {
      clearTimeout(timer);
    }
  };
}

/** The outcome at `index`, or a `transportError` that says what was wrong with it. */
function checkedOutcome(
  outcomes: unknown,
  index: number,
  delivery: ClaimedDelivery,
  consumer: string,
): ExternalDeliveryResult {
  const where = `${consumer} outcome ${index} (event ${delivery.eventId})`;
  if (!Array.isArray(outcomes))
    return transportError(`${consumer} resolved with ${describe(outcomes)} instead of an array of outcomes`);
  const outcome = outcomes[index] as Partial<Record<string, unknown>> | undefined;
  if (outcome === null || typeof outcome !== 'object')
    return transportError(`${where} is missing: send must return one outcome per delivery, in order`);
  const code = (): string | null =>
    typeof outcome.errorCode === 'string' &&
    outcome.errorCode.length > 0 &&
    outcome.errorCode.length <= MAX_CODE_LENGTH
      ? outcome.errorCode
      : null;
  const text = typeof outcome.error === 'string' ? outcome.error : '';
  const runId =
    typeof outcome.externalRunId === 'string' ? outcome.externalRunId.slice(0, MAX_CODE_LENGTH * 2) : null;
  const delay = (value: unknown): number | null =>
    Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DURATION_MS
      ? (value as number)
      : null;
  switch (outcome.status) {
    case 'delivered':
      return { status: 'delivered', externalRunId: runId };
    case 'failed':
    case 'dead': {
      const errorCode = code();
      if (!errorCode)
        return transportError(`${where} has no errorCode of 1 to ${MAX_CODE_LENGTH} characters`);
      if (outcome.status === 'dead') return { status: 'dead', errorCode, error: text, externalRunId: runId };
      const retryAfterMs = outcome.retryAfterMs === undefined ? undefined : delay(outcome.retryAfterMs);
      if (retryAfterMs === null)
        return transportError(`${where} has a retryAfterMs that is not a duration in ms`);
      return { status: 'failed', errorCode, error: text, retryAfterMs, externalRunId: runId };
    }
    case 'deferred': {
      const errorCode = code();
      const retryAfterMs = delay(outcome.retryAfterMs);
      if (!errorCode || retryAfterMs === null)
        return transportError(`${where} is deferred without an errorCode and a retryAfterMs in ms`);
      return { status: 'deferred', errorCode, error: text, retryAfterMs };
    }
    default:
      return transportError(
        `${where} has status ${describe(outcome.status)}; expected delivered, failed, dead or deferred`,
      );
  }
}

function transportError(error: string): ExternalDeliveryResult {
  return { status: 'failed', errorCode: TRANSPORT_ERROR_CODES.transportError, error };
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  if (Array.isArray(value)) return 'an array';
  return value === null ? 'null' : typeof value;
}
