import { NATS_RAW_MESSAGE, OutboxNatsDeserializer, OutboxRmqDeserializer } from './nest-deserializers';

const envelope = { eventId: 'e1', eventName: 'crm.contact.created.v1', data: { contactId: 'c1' } };

describe('OutboxRmqDeserializer', () => {
  const deserializer = new OutboxRmqDeserializer();

  it('routes an outbox message by its x-outbox-event header, with the whole envelope as data', () => {
    expect(deserializer.deserialize(envelope, { headers: { 'x-outbox-event': envelope.eventName } })).toEqual(
      {
        pattern: envelope.eventName,
        data: envelope,
      },
    );
  });

  it("reads other messages as Nest's own deserializer does", () => {
    const packet = { pattern: 'sum', data: [1, 2] };
    expect(deserializer.deserialize(packet, { headers: {} })).toBe(packet);
    expect(deserializer.deserialize('plain text', {})).toEqual({ pattern: undefined, data: 'plain text' });
  });
});

describe('OutboxNatsDeserializer', () => {
  const deserializer = new OutboxNatsDeserializer();
  const message = (headers: Record<string, string> | undefined, body: string) => ({
    headers: headers && { get: (name: string) => headers[name] ?? '' },
    reply: '$JS.ACK.s.c.1.1.1.1.0',
    json: <T>() => JSON.parse(body) as T,
    string: () => body,
    respond: () => true,
  });

  it('gives an outbox message the subscription subject as pattern and the envelope as data', () => {
    const msg = message({ 'x-outbox-event': envelope.eventName }, JSON.stringify(envelope));
    expect(deserializer.deserialize(msg, { channel: 'crm.>' })).toEqual({ pattern: 'crm.>', data: envelope });
  });

  it('leaves the raw message on its headers, where the inbox interceptor finds the reply subject', () => {
    const msg = message({}, '{}');
    deserializer.deserialize(msg, { channel: 'x' });
    expect((msg.headers as Record<symbol, unknown>)[NATS_RAW_MESSAGE]).toBe(msg);
  });

  it('reads a body that is not JSON as text', () => {
    expect(deserializer.deserialize(message(undefined, 'hello'), { channel: 'x' })).toEqual({
      pattern: 'x',
      data: 'hello',
    });
  });
});
