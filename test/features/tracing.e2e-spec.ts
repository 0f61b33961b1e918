import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Injectable } from '@nestjs/common';
import { context, SpanKind, SpanStatusCode, trace, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { OnOutboxEvent, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxTracingModule } from 'nestjs-pg-outbox/observability';
import { buildApp, type TestApp } from '../support/build-app';
import { TYPESCRIPT_NODE_ARGS } from '../support/child-relay';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { enqueueIn, enqueueManyIn, makeRetriesDue, TENANT } from '../support/outbox-fixture';

const run = promisify(execFile);
/** Fails its first attempt, then succeeds; records the span that is active while it runs. */
@Injectable()
class TracedConsumer {
  readonly activeSpans: (SpanContext | undefined)[] = [];

  @OnOutboxEvent('test.trace.v1', { consumer: 'traced', backoff: { baseMs: 1, capMs: 1, jitter: 0 } })
  handle(event: OutboxEvent): void {
    this.activeSpans.push(trace.getActiveSpan()?.spanContext());
    if (this.activeSpans.length === 1) throw new Error(`first attempt of ${event.eventId} fails`);
  }
}

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const producerTracer = provider.getTracer('test-producer');
let db: TestDatabase;
let receiver: WebhookReceiver;

beforeAll(async () => {
  // the app's SDK set-up, as an app registers it (the OpenTelemetry API keeps it globally)
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  db = await createTestDatabase();
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  trace.disable();
  context.disable();
  await receiver?.close();
  await db?.drop();
});
beforeEach(() => exporter.reset());

async function app(tracing: boolean): Promise<TestApp> {
  return buildApp({
    url: db.url,
    providers: [TracedConsumer],
    imports: tracing ? [OutboxTracingModule.forRoot()] : [],
    webhooks: {
      webhooks: [
        { name: 'hook', url: `${receiver.baseUrl}/hook`, events: ['test.trace.*'], timeoutMs: 2000 },
      ],
    },
  });
}

/** Enqueues one event inside a producer span (as an HTTP handler's span would be); returns both. */
async function enqueueInSpan(t: TestApp): Promise<{ eventId: string; producer: SpanContext }> {
  return producerTracer.startActiveSpan('POST /orders', { kind: SpanKind.SERVER }, async (span) => {
    const eventId = await enqueueIn(t, {
      eventName: 'test.trace.v1',
      correlationId: 'order-7',
      payload: { order: 7 },
    });
    span.end();
    return { eventId, producer: span.spanContext() };
  });
}

const consumerSpans = (consumer: string): ReadableSpan[] =>
  exporter
    .getFinishedSpans()
    .filter((s) => s.attributes['outbox.consumer'] === consumer)
    .sort((a, b) => Number(a.attributes['outbox.attempt']) - Number(b.attributes['outbox.attempt']));

describe('OutboxTracingModule', () => {
  it('stores the producer context, parents the first attempt on it, links the retry, and sends traceparent', async () => {
    const t = await app(true);
    try {
      const { eventId, producer } = await enqueueInSpan(t);
      const [row] = await db.sql<{ traceparent: string | null }>(
        'select traceparent from event_outbox where id = $1',
        [eventId],
      );
      expect(row.traceparent).toBe(`00-${producer.traceId}-${producer.spanId}-01`);

      await t.relay.drain();
      await makeRetriesDue(db);
      await t.relay.drain();

      const [first, retry] = consumerSpans('traced');
      expect(consumerSpans('traced')).toHaveLength(2);
      expect(first.name).toBe('process test.trace.v1');
      expect(first.kind).toBe(SpanKind.CONSUMER);
      expect(first.spanContext().traceId).toBe(producer.traceId);
      expect(first.parentSpanContext?.spanId).toBe(producer.spanId);
      expect(first.attributes).toMatchObject({
        'messaging.system': 'nestjs-pg-outbox',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'test.trace.v1',
        'messaging.message.id': eventId,
        'messaging.message.conversation_id': 'order-7',
        'messaging.consumer.group.name': 'traced',
        'outbox.tenant_id': TENANT,
        'outbox.attempt': 1,
        'outbox.outcome': 'failed',
        'error.type': 'handlerError',
      });
      expect(first.status.code).toBe(SpanStatusCode.ERROR);
      expect(first.status.message).toContain('first attempt');

      expect(retry.attributes).toMatchObject({ 'outbox.attempt': 2, 'outbox.outcome': 'delivered' });
      expect(retry.status.code).toBe(SpanStatusCode.UNSET);
      expect(retry.parentSpanContext).toBeUndefined();
      expect(retry.spanContext().traceId).not.toBe(producer.traceId);
      expect(retry.links.map((l) => l.context.spanId)).toEqual([producer.spanId]);

      // the handler ran inside its attempt's span
      const consumer = t.app.get(TracedConsumer);
      expect(consumer.activeSpans.map((s) => s?.spanId)).toEqual([
        first.spanContext().spanId,
        retry.spanContext().spanId,
      ]);

      // the webhook request carries the webhook attempt's span
      const [hook] = consumerSpans('webhook:hook');
      expect(hook.parentSpanContext?.spanId).toBe(producer.spanId);
      expect(hook.attributes['outbox.consumer.kind']).toBe('webhook');
      const request = receiver.requests.find((r) => r.id === eventId)!;
      expect(request.headers.traceparent).toBe(
        `00-${hook.spanContext().traceId}-${hook.spanContext().spanId}-01`,
      );
    } finally {
      await t.close();
    }
  });

  it('stores one trace context for the events of an enqueueMany, and none outside a span', async () => {
    const t = await app(true);
    try {
      const many = (tenantId: string) =>
        enqueueManyIn(t, [
          { tenantId, eventName: 'test.other.v1', payload: { n: 1 } },
          { tenantId, eventName: 'test.other.v1', payload: { n: 2 } },
        ]);
      const { ids, producer } = await producerTracer.startActiveSpan('batch', async (span) => {
        const result = { ids: await many(TENANT), producer: span.spanContext() };
        span.end();
        return result;
      });
      const outside = await many(TENANT);
      const rows = await db.sql<{ id: string; traceparent: string | null }>(
        'select id, traceparent from event_outbox where id = any($1)',
        [[...ids, ...outside]],
      );
      const byId = new Map(rows.map((r) => [r.id, r.traceparent]));
      for (const id of ids) expect(byId.get(id)).toBe(`00-${producer.traceId}-${producer.spanId}-01`);
      for (const id of outside) expect(byId.get(id)).toBeNull();
    } finally {
      await t.close();
    }
  });

  it('without the module: no trace context stored, no span, no traceparent header', async () => {
    const t = await app(false);
    try {
      const { eventId } = await enqueueInSpan(t);
      await t.relay.drain();
      await makeRetriesDue(db);
      await t.relay.drain();
      const [row] = await db.sql<{ traceparent: string | null }>(
        'select traceparent from event_outbox where id = $1',
        [eventId],
      );
      expect(row.traceparent).toBeNull();
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['POST /orders']);
      expect(receiver.requests.find((r) => r.id === eventId)!.headers.traceparent).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it('loads @opentelemetry/api only in an app that imports the module', async () => {
    const child = (modules: string) =>
      run(
        process.execPath,
        [...TYPESCRIPT_NODE_ARGS, join(__dirname, '..', 'support', 'observability-peers-child.ts')],
        {
          env: { ...process.env, DATABASE_URL: db.url, MODULES: modules },
          timeout: 60_000,
        },
      );
    const plain = await child('board');
    expect(plain.stdout).toContain('LOADED []');
    const traced = await child('tracing');
    expect(traced.stdout).toContain('DELIVERED 1');
    expect(traced.stdout).toContain('LOADED ["@opentelemetry/api"]');
  }, 120_000);
});
