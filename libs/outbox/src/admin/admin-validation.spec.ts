import { OutboxValidationError } from '../errors/outbox.error';
import { checkConsumerName, checkEventName, checkInteger, checkUuid } from './admin-validation';

describe('admin input checks', () => {
  const fieldOf = (call: () => unknown): string | null => {
    try {
      call();
      return null;
    } catch (error) {
      expect(error).toBeInstanceOf(OutboxValidationError);
      return (error as OutboxValidationError).field;
    }
  };

  it('lowercases a UUID and refuses anything else, naming the field', () => {
    expect(checkUuid('tenantId', 'C4D5E6F7-0A1B-4C2D-8E3F-405162738495')).toBe(
      'c4d5e6f7-0a1b-4c2d-8e3f-405162738495',
    );
    for (const bad of ['', 'x', 42, null, undefined, 'c4d5e6f7-0a1b-4c2d-8e3f-40516273849'])
      expect(fieldOf(() => checkUuid('tenantId', bad))).toBe('tenantId');
  });

  it('takes integers within bounds, with a fallback when absent', () => {
    expect(checkInteger('limit', undefined, 1, 500, 50)).toBe(50);
    expect(checkInteger('limit', 500, 1, 500, 50)).toBe(500);
    expect(checkInteger('offset', 10 ** 9, 0, null, 0)).toBe(10 ** 9);
    for (const bad of [0, 501, 1.5, NaN, '3', null])
      expect(fieldOf(() => checkInteger('limit', bad, 1, 500, 50))).toBe('limit');
    expect(fieldOf(() => checkInteger('offset', -1, 0, null, 0))).toBe('offset');
  });

  it('accepts any consumer name, even unknown ones, but not empty or control characters', () => {
    expect(checkConsumerName('consumer', 'OldName.billing')).toBe('OldName.billing');
    expect(checkConsumerName('consumer', undefined)).toBeNull();
    for (const bad of ['', 'a\nb', 'x'.repeat(201), 7])
      expect(fieldOf(() => checkConsumerName('consumer', bad))).toBe('consumer');
  });

  it('accepts exact event names only', () => {
    expect(checkEventName('eventName', 'crm.contact.created.v1')).toBe('crm.contact.created.v1');
    expect(checkEventName('eventName', undefined)).toBeNull();
    for (const bad of ['Contact Created', 'crm.*', ''])
      expect(fieldOf(() => checkEventName('eventName', bad))).toBe('eventName');
  });
});
