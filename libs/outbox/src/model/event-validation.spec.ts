import { OutboxValidationError } from '../errors/outbox.error';
import { checkSchemaVersion, serialisePayload, validateEvent } from './event-validation';

describe('event validation', () => {
  const base = {
    tenantId: 'A3E1C1DE-0F5B-4A51-8A3E-7B2F3C4D5E6F',
    eventName: 'crm.contact.created.v1',
    payload: { a: 1 },
  };

  it('accepts a valid event and lower-cases the tenant id', () => {
    const event = validateEvent(base, 'event', 1024);
    expect(event).toMatchObject({
      tenantId: base.tenantId.toLowerCase(),
      payloadJson: '{"a":1}',
      schemaVersion: 1,
      occurredAt: null,
    });
  });

  it('keeps a delay given as deliverAt or delayMs, and none when neither is given', () => {
    const at = new Date('2030-01-01T00:00:00Z');
    expect(validateEvent(base, 'event', 1024)).toMatchObject({ deliverAt: null, delayMs: null });
    expect(validateEvent({ ...base, deliverAt: at }, 'event', 1024)).toMatchObject({
      deliverAt: at,
      delayMs: null,
    });
    expect(validateEvent({ ...base, delayMs: 0 }, 'event', 1024)).toMatchObject({
      deliverAt: null,
      delayMs: 0,
    });
    expect(validateEvent({ ...base, delayMs: 1.5 }, 'event', 1024)).toMatchObject({ delayMs: 1.5 });
  });

  it.each([
    [{ deliverAt: new Date(), delayMs: 5 }, 'events[1].delayMs', /both given/],
    [{ deliverAt: new Date(Number.NaN) }, 'events[1].deliverAt', /must be a valid Date/],
    [{ deliverAt: 1_700_000_000_000 }, 'events[1].deliverAt', /must be a valid Date/],
    [{ delayMs: -0.5 }, 'events[1].delayMs', /0 or more/],
    [{ delayMs: Infinity }, 'events[1].delayMs', /finite number/],
    [{ delayMs: 5n }, 'events[1].delayMs', /finite number/],
  ])('refuses the delay %p, naming %s', (extra, field, message) => {
    const attempt = () => validateEvent({ ...base, ...(extra as object) }, 'events[1]', 1024);
    expect(attempt).toThrow(OutboxValidationError);
    expect(attempt).toThrow(message);
    try {
      attempt();
    } catch (error) {
      expect((error as OutboxValidationError).field).toBe(field);
    }
  });

  it("names the first bad field in the fields' order: the texts before the delay, the delay before dedupe", () => {
    const field = (extra: object): string | undefined => {
      try {
        validateEvent({ ...base, ...extra }, 'event', 1024);
      } catch (error) {
        return (error as OutboxValidationError).field;
      }
      return undefined;
    };
    expect(field({ correlationId: '', delayMs: -1, dedupe: {} })).toBe('event.correlationId');
    expect(field({ aggregateType: 5, deliverAt: 'x' })).toBe('event.aggregateType');
    expect(field({ delayMs: -1, dedupe: {} })).toBe('event.delayMs');
  });

  it('takes a missing schemaVersion as 1 and keeps a positive integer', () => {
    expect(checkSchemaVersion(undefined, 'event.schemaVersion')).toBe(1);
    expect(checkSchemaVersion(1, 'event.schemaVersion')).toBe(1);
    expect(checkSchemaVersion(7, 'event.schemaVersion')).toBe(7);
  });

  it.each([null, 0, -1, 1.5, '2', Number.NaN, Infinity, 2 ** 53, 2n, {}])(
    'refuses the schemaVersion %p, naming the field and saying how to fix it',
    (value) => {
      const attempt = () => checkSchemaVersion(value, 'events[2].schemaVersion');
      expect(attempt).toThrow(OutboxValidationError);
      expect(attempt).toThrow(/^events\[2\]\.schemaVersion must be a positive integer/);
      expect(attempt).toThrow(/leave it out for version 1/);
      try {
        attempt();
      } catch (error) {
        expect((error as OutboxValidationError).field).toBe('events[2].schemaVersion');
      }
    },
  );

  it('refuses a null schemaVersion instead of storing the event as version 1', () => {
    expect(() => validateEvent({ ...base, schemaVersion: null as never }, 'event', 1024)).toThrow(
      /event\.schemaVersion must be a positive integer \(1, 2, …\), got null/,
    );
  });

  it('serialises faithful JSON unchanged', () => {
    const payload = {
      s: 'é 😀',
      n: -1.5,
      b: false,
      z: null,
      list: [1, [2, { x: 'y' }]],
      bare: Object.create(null),
    };
    expect(JSON.parse(serialisePayload(payload, 'p', 10_000))).toEqual(JSON.parse(JSON.stringify(payload)));
  });

  it('names the deepest field at fault', () => {
    const attempt = () =>
      validateEvent({ ...base, payload: { items: [{ ok: 1 }, { price: Infinity }] } }, 'events[3]', 1024);
    expect(attempt).toThrow(OutboxValidationError);
    expect(attempt).toThrow(/events\[3\]\.payload\.items\[1\]\.price/);
  });

  it('counts the limit in UTF-8 bytes, not characters', () => {
    expect(() => serialisePayload({ s: 'é'.repeat(10) }, 'p', 20)).toThrow(/bytes/);
    expect(serialisePayload({ s: 'e'.repeat(10) }, 'p', 20)).toBe('{"s":"eeeeeeeeee"}');
  });

  it('refuses keys that jsonb cannot store', () => {
    expect(() => serialisePayload({ 'a\u0000': 1 }, 'p', 100)).toThrow(/key/);
    expect(() => serialisePayload({ '\ud800': 1 }, 'p', 100)).toThrow(/key/);
  });

  it('refuses sparse arrays and symbol keys', () => {
    // eslint-disable-next-line no-sparse-arrays -- the hole is the input under test
    expect(() => serialisePayload([1, , 3], 'p', 100)).toThrow(/sparse/);
    expect(() => serialisePayload({ [Symbol('x')]: 1 }, 'p', 100)).toThrow(/symbol/);
  });
});
