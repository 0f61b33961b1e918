import type { OutboxEvent } from '../model/outbox-event.interface';
import type { OutboxTransportBatch, OutboxTransportOutcome } from '../model/outbox-transport.interface';
import { WebhookCircuitBreaker } from '../webhooks/webhook-circuit-breaker';
import { BrokerForwarder, type BrokerMessage, type BrokerPublisher } from './broker-forwarder';
import { BrokerUnavailableError } from './broker-link';

const event = (n: number, data: OutboxEvent['data'] = { n }): OutboxEvent => ({
  eventId: `00000000-0000-4000-8000-00000000000${n}`,
  eventName: 'test.unit.created.v1',
  tenantId: '00000000-0000-4000-8000-0000000000aa',
  aggregateType: null,
  aggregateId: null,
  occurredAt: new Date('2026-01-01T00:00:00Z'),
  correlationId: null,
  schemaVersion: 1,
  data,
});
const batch = (...events: OutboxEvent[]): OutboxTransportBatch => ({
  consumer: 'broker:x',
  tenantId: events[0]!.tenantId,
  deliveries: events.map((e) => ({ event: e, attempt: 1, headers: {} })),
  signal: new AbortController().signal,
});

/** Publishes nothing: answers with what `answer` says for each message it is given. */
class ScriptedPublisher implements BrokerPublisher {
  given: BrokerMessage[][] = [];
  constructor(private readonly answer: (m: BrokerMessage) => OutboxTransportOutcome | Error) {}
  async publish(messages: readonly BrokerMessage[]): Promise<OutboxTransportOutcome[]> {
    this.given.push([...messages]);
    const answers = messages.map(this.answer);
    const error = answers.find((a) => a instanceof Error);
    if (error) throw error;
    return answers as OutboxTransportOutcome[];
  }
  async close(): Promise<void> {}
}

describe('BrokerForwarder', () => {
  it('kills what cannot become a message and publishes the rest in one call, outcomes in batch order', async () => {
    const publisher = new ScriptedPublisher(() => ({ status: 'delivered' }));
    const forwarder = new BrokerForwarder(
      'broker:x',
      (e) => (e.data === 'bad-destination' ? 'has space' : e.eventName),
      (value) => !value.includes(' '),
      publisher,
      null,
    );
    const outcomes = await forwarder.send(
      batch(event(1), event(2, 'bad-destination'), event(3, Infinity), event(4)),
    );
    expect(outcomes.map((o) => ('errorCode' in o ? `${o.status}:${o.errorCode}` : o.status))).toEqual([
      'delivered',
      'dead:badDestination',
      'dead:malformedPayload',
      'delivered',
    ]);
    expect(publisher.given).toHaveLength(1);
    expect(publisher.given[0]!.map((m) => m.eventId)).toEqual([event(1).eventId, event(4).eventId]);
    expect(JSON.parse(publisher.given[0]![0]!.body.toString())).toMatchObject({ eventId: event(1).eventId });
  });

  it('gives the batch back when no connection can be had', async () => {
    const publisher = new ScriptedPublisher(() => new BrokerUnavailableError('down', 250, null));
    const forwarder = new BrokerForwarder(
      'broker:x',
      (e) => e.eventName,
      () => true,
      publisher,
      null,
    );
    expect(await forwarder.send(batch(event(1)))).toEqual([
      { status: 'deferred', errorCode: 'brokerUnavailable', error: 'down', retryAfterMs: 250 },
    ]);
  });

  it('opens its circuit after repeated timeouts, then defers without publishing', async () => {
    const now = 1000;
    const breaker = new WebhookCircuitBreaker(2, 5000, 100, () => now);
    const publisher = new ScriptedPublisher(() => ({
      status: 'failed',
      errorCode: 'publishTimeout',
      error: 'slow',
    }));
    const forwarder = new BrokerForwarder(
      'broker:x',
      (e) => e.eventName,
      () => true,
      publisher,
      breaker,
    );
    await forwarder.send(batch(event(1)));
    await forwarder.send(batch(event(2)));
    const [outcome] = await forwarder.send(batch(event(3)));
    expect(outcome).toMatchObject({ status: 'deferred', errorCode: 'circuitOpen', retryAfterMs: 5000 });
    expect(publisher.given).toHaveLength(2);
  });
});
