import { webhookBody } from './webhook-envelope';
import type { OutboxEvent } from '../model/outbox-event.interface';

const event: OutboxEvent = {
  eventId: '7d4f9a52-0b6e-4c1e-9f3a-2b5c6d7e8f90',
  eventName: 'crm.contact.created.v1',
  tenantId: 'a3e1c1de-0f5b-4a51-8a3e-7b2f3c4d5e6f',
  aggregateType: 'contact',
  aggregateId: 'c-1',
  occurredAt: new Date('2026-01-02T03:04:05.678Z'),
  correlationId: null,
  schemaVersion: 1,
  data: { name: 'Ada' },
};

describe('webhook envelope', () => {
  it('holds the declared fields only, in a fixed order', () => {
    const extra = { ...event, status: 'processing', seq: 7 } as OutboxEvent;
    expect(webhookBody(extra)).toBe(
      '{"eventId":"7d4f9a52-0b6e-4c1e-9f3a-2b5c6d7e8f90","eventName":"crm.contact.created.v1","tenantId":"a3e1c1de-0f5b-4a51-8a3e-7b2f3c4d5e6f",' +
        '"occurredAt":"2026-01-02T03:04:05.678Z","correlationId":null,"aggregate":{"type":"contact","id":"c-1"},"schemaVersion":1,"data":{"name":"Ada"}}',
    );
    expect(
      JSON.parse(webhookBody({ ...event, aggregateType: null, aggregateId: null })).aggregate,
    ).toBeNull();
  });

  it('refuses what JSON would change or cannot say', () => {
    expect(() => webhookBody({ ...event, data: { n: Infinity } })).toThrow(/data\.n/);
    expect(() => webhookBody({ ...event, occurredAt: new Date(Number.NaN) })).toThrow(/occurredAt/);
    expect(() => webhookBody({ ...event, schemaVersion: 0 })).toThrow(/schemaVersion/);
  });
});
