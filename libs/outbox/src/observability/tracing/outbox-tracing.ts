import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type * as OtelApi from '@opentelemetry/api';
import type { ClaimedDelivery } from '../../model/claimed-delivery';
import type { OutboxConsumer } from '../../model/outbox-consumer';
import { OutboxInstrumentation, type OutboxAttemptObserver } from '../../extension/outbox-instrumentation';
import { loadOptionalPeer } from '../../extension/optional-peer';
import { formatTraceParent, parseTraceParent } from './traceparent';
import type { OutboxTracingModuleOptions } from './outbox-tracing-options.interface';

/** Token of the options given to `OutboxTracingModule.forRoot()`. */
export const OUTBOX_TRACING_OPTIONS = Symbol('OUTBOX_TRACING_OPTIONS');

/** `messaging.system` of the outbox's spans. */
export const MESSAGING_SYSTEM = 'nestjs-pg-outbox';

/**
 * OpenTelemetry spans of the outbox (`@opentelemetry/api`, loaded when this module boots): the trace context is
 * stored with each event at enqueue; each delivery attempt gets a CONSUMER span, the child of that context on
 * the first attempt and a new trace linked to it on retries; webhook requests carry the span's `traceparent`.
 * Shapes and attributes: docs/observability.md.
 */
@Injectable()
export class OutboxTracing implements OnModuleInit, OnModuleDestroy {
  private detach: (() => void) | null = null;

  constructor(
    @Inject(OUTBOX_TRACING_OPTIONS) private readonly options: OutboxTracingModuleOptions,
    private readonly instrumentation: OutboxInstrumentation,
  ) {}

  onModuleInit(): void {
    const api = loadOptionalPeer<typeof OtelApi>('@opentelemetry/api', 'OutboxTracingModule');
    const tracerName = this.options.tracerName ?? MESSAGING_SYSTEM;
    const capture = this.options.captureAtEnqueue !== false;
    const propagate = this.options.propagateToWebhooks !== false;
    this.detach = this.instrumentation.add({
      traceContext: () => {
        if (!capture) return null;
        const span = api.trace.getSpan(api.context.active());
        const context = span?.spanContext();
        return context && api.isSpanContextValid(context) ? formatTraceParent(context) : null;
      },
      attemptStarted: (delivery, consumer) =>
        startAttempt(api, api.trace.getTracer(tracerName), delivery, consumer),
      outgoingHeaders: (headers) => {
        if (!propagate) return;
        const context = api.trace.getSpan(api.context.active())?.spanContext();
        if (!context || !api.isSpanContextValid(context)) return;
        headers.traceparent = formatTraceParent(context);
        const state = context.traceState?.serialize();
        if (state) headers.tracestate = state;
      },
    });
  }

  onModuleDestroy(): void {
    this.detach?.();
    this.detach = null;
  }
}

/**
 * One attempt's span. Its parent is never the relay's own async context (a wake-up may run inside the request
 * that committed): the producer's stored context on the first attempt, a new trace with a link to it after.
 */
function startAttempt(
  api: typeof OtelApi,
  tracer: OtelApi.Tracer,
  delivery: ClaimedDelivery,
  consumer: OutboxConsumer,
): OutboxAttemptObserver {
  const event = delivery.event;
  const stored = parseTraceParent(delivery.traceparent);
  const producer: OtelApi.SpanContext | null = stored ? { ...stored, isRemote: true } : null;
  const first = delivery.attempt === 1 && !delivery.recovered;
  const parent = producer && first ? api.trace.setSpanContext(api.ROOT_CONTEXT, producer) : api.ROOT_CONTEXT;
  const attributes: OtelApi.Attributes = {
    'messaging.system': MESSAGING_SYSTEM,
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.destination.name': event.eventName,
    'messaging.message.id': event.eventId,
    'messaging.consumer.group.name': consumer.name,
    'outbox.tenant_id': event.tenantId,
    'outbox.consumer': consumer.name,
    'outbox.consumer.kind': consumer.kind === 'handler' ? 'in-process' : consumer.kind,
    'outbox.attempt': delivery.attempt,
  };
  if (event.correlationId) attributes['messaging.message.conversation_id'] = event.correlationId;
  if (event.aggregateId) attributes['outbox.aggregate'] = `${event.aggregateType ?? ''}:${event.aggregateId}`;
  const span = tracer.startSpan(
    `process ${event.eventName}`,
    {
      kind: api.SpanKind.CONSUMER,
      attributes,
      links: producer && !first ? [{ context: producer, attributes: { 'outbox.link': 'producer' } }] : [],
    },
    parent,
  );
  const active = api.trace.setSpan(parent, span);
  return {
    run: (work) => api.context.with(active, work),
    ended: (outcome) => {
      span.setAttribute('outbox.outcome', outcome.status);
      if (outcome.status === 'failed' || outcome.status === 'dead') {
        if (outcome.errorCode) span.setAttribute('error.type', outcome.errorCode);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: outcome.error ?? undefined });
      }
      span.end();
    },
  };
}
