import { errorText } from '../errors/error-text';

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
