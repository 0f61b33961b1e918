import type { OutboxRelayOptions } from './outbox-module-options.interface';
import { resolveOutboxOptions, wakeUpSides } from './outbox-options';

const sidesOf = (relay: OutboxRelayOptions) => wakeUpSides(resolveOutboxOptions({ relay }).options.relay);

describe('relay.wakeUps', () => {
  it("'auto' (the default): an instance with a relay listens, one without notifies", () => {
    expect(resolveOutboxOptions({}).options.relay.wakeUps).toBe('auto');
    expect(sidesOf({})).toEqual({ listen: true, notify: false });
    expect(sidesOf({ enabled: false })).toEqual({ listen: false, notify: true });
  });

  it("'listen', 'notify', 'both', 'off' say which; only an instance with a relay listens", () => {
    expect(sidesOf({ wakeUps: 'listen' })).toEqual({ listen: true, notify: false });
    expect(sidesOf({ wakeUps: 'notify' })).toEqual({ listen: false, notify: true });
    expect(sidesOf({ wakeUps: 'both' })).toEqual({ listen: true, notify: true });
    expect(sidesOf({ wakeUps: 'off' })).toEqual({ listen: false, notify: false });
    expect(sidesOf({ enabled: false, wakeUps: 'both' })).toEqual({ listen: false, notify: true });
    expect(sidesOf({ enabled: false, wakeUps: 'listen' })).toEqual({ listen: false, notify: false });
  });

  it('refuses relay.notify, relay.listen and relay.notifyGapMs, each naming relay.wakeUps, and an unknown value', () => {
    const relay = { notify: true, listen: false, notifyGapMs: 2, wakeUps: 'sometimes' };
    const { problems } = resolveOutboxOptions({ relay: relay as OutboxRelayOptions });
    expect(problems).toEqual([
      `option relay.wakeUps must be one of 'auto', 'listen', 'notify', 'both', 'off', got "sometimes"`,
      expect.stringMatching(/^option relay\.notify is now relay\.wakeUps \('notify' or 'both'/),
      expect.stringMatching(/^option relay\.listen is now relay\.wakeUps \('listen' or 'both'/),
      expect.stringMatching(/^option relay\.notifyGapMs is now relay\.wakeUps /),
    ]);
  });
});
