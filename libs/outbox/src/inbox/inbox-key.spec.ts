import { inboxEventId } from './inbox-key';

describe('inboxEventId', () => {
  it('keeps a UUID message id as the event id, lowercased, with no separate message id', () => {
    expect(inboxEventId('0A0A0A0A-0000-4000-8000-00000000000A')).toEqual({
      eventId: '0a0a0a0a-0000-4000-8000-00000000000a',
      messageId: null,
    });
  });

  it('derives one stable UUID from any other message id, and keeps the id as sent', () => {
    const first = inboxEventId('order-42');
    expect(first.messageId).toBe('order-42');
    expect(first.eventId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(inboxEventId('order-42')).toEqual(first);
    expect(inboxEventId('order-43').eventId).not.toBe(first.eventId);
  });
});
