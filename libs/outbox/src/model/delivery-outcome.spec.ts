import { errorText } from '../errors/error-text';
import type { ClaimedDelivery } from './claimed-delivery';
import { snoozed } from './delivery-outcome';
import type { OutboxConsumer } from './outbox-consumer';

describe('errorText', () => {
  it('gives name and message of an Error, and String() of anything else', () => {
    expect(errorText(new TypeError('bad'))).toBe('TypeError: bad');
    expect(errorText('plain')).toBe('thrown non-error: plain');
    expect(errorText(undefined)).toBe('thrown non-error: undefined');
  });

  it('gives a text for values whose conversion to a string throws', () => {
    const noPrototype = Object.create(null) as object;
    const throwingToString = {
      toString() {
        throw new Error('no');
      },
    };
    const throwingMessage = new Error('hidden');
    Object.defineProperty(throwingMessage, 'message', {
      get() {
        throw new Error('no message for you');
      },
    });
    const throwingName = new Error('kept');
    Object.defineProperty(throwingName, 'name', {
      get() {
        throw new Error('no name');
      },
    });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(errorText(noPrototype)).toBe('thrown non-error: [object Object] (unprintable value)');
    expect(errorText(throwingToString)).toBe('thrown non-error: [object Object] (unprintable value)');
    expect(errorText(throwingMessage)).toBe('Error: (unprintable message)');
    expect(errorText(throwingName)).toBe('Error: kept');
    expect(errorText(proxy)).toBe('thrown non-error: (unprintable value)');
    expect(errorText(Symbol('s'))).toBe('thrown non-error: Symbol(s)');
  });

  it('bounds the text', () => {
    expect(errorText(new Error('x'.repeat(5000))).length).toBeLessThanOrEqual(2001);
  });
});

describe('snoozed', () => {
  const consumer = {
    name: 'Sync.push',
    maxAttempts: 3,
    maxSnoozes: 2,
    backoff: { baseMs: 1000, capMs: 60_000, jitter: 0 },
  } as OutboxConsumer;
  const delivery = (snoozes: number, attempt = 1): ClaimedDelivery =>
    ({
      deliveryId: '7',
      consumerName: consumer.name,
      attempt,
      recovered: false,
      snoozes,
      eventId: 'e',
      tenantId: 't',
      event: { eventName: 'x.y.z' },
    }) as ClaimedDelivery;
  const why = { errorCode: 'snoozed', error: 'not now' };

  it('gives the attempt back and counts a snooze while under maxSnoozes', () => {
    expect(snoozed(delivery(1), consumer, 5000, why)).toMatchObject({
      status: 'deferred',
      snoozed: true,
      retryInMs: 5000,
      errorCode: 'snoozed',
      holdMs: undefined,
    });
    expect(snoozed(delivery(0), consumer, 5000, { ...why, holdPair: true }).holdMs).toBe(5000);
  });

  it('charges a snooze past maxSnoozes as a failed attempt, retried no sooner than asked, and dead once attempts are spent', () => {
    expect(snoozed(delivery(2), consumer, 5000, why)).toMatchObject({
      status: 'failed',
      errorCode: 'snoozeLimit',
      retryInMs: 5000,
    });
    expect(snoozed(delivery(2), consumer, 5000, why).snoozed).toBeUndefined();
    expect(snoozed(delivery(2, 3), consumer, 5000, why).status).toBe('dead');
  });
});
