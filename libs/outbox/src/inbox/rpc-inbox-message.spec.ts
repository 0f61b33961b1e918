import { jetStreamDeliveryCount } from './rpc-inbox-message';

describe('jetStreamDeliveryCount', () => {
  it('reads the delivery count of both forms of JetStream ack subject', () => {
    expect(jetStreamDeliveryCount('$JS.ACK.orders.crm.3.120.118.1764500000000000000.7')).toBe(3);
    expect(jetStreamDeliveryCount('$JS.ACK.hub.ACCHASH.orders.crm.2.120.118.1764500000000000000.7.xyz')).toBe(
      2,
    );
  });

  it('is null for a subject that is not an ack subject', () => {
    expect(jetStreamDeliveryCount('_INBOX.abc.def')).toBeNull();
    expect(jetStreamDeliveryCount('$JS.ACK.too.short')).toBeNull();
    expect(jetStreamDeliveryCount('$JS.ACK.orders.crm.x.120.118.1764500000000000000.7')).toBeNull();
  });
});
