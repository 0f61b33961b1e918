import { recordOutcomes } from './record-outcomes';
import { outboxNames } from '../../model/table-names';
import type { DeliveryOutcome } from '../../model/delivery-outcome';

const TENANT = '11111111-1111-1111-1111-111111111111';
const TOKEN = '22222222-2222-2222-2222-222222222222';

function pair(eventId: string, consumer: string, outcome: Partial<DeliveryOutcome> = {}): DeliveryOutcome {
  return {
    deliveryId: null,
    pair: { eventId, consumer, attempt: 1, tenantId: TENANT, eventSeq: '7' },
    status: 'delivered',
    errorCode: null,
    error: null,
    retryInMs: 0,
    ...outcome,
  };
}

describe('recordOutcomes', () => {
  const n = outboxNames();

  it('sends status, retry and attempt once when every outcome has the same (the common batch)', () => {
    const { values } = recordOutcomes(n, [pair('e1', 'a'), pair('e1', 'b'), pair('e2', 'a')], TOKEN, {
      fenced: true,
    });
    // $2, $5 and $10 empty; $19–$21 the values
    expect([values[1], values[4], values[9]]).toEqual([[], [], []]);
    expect(values.slice(18)).toEqual(['delivered', 0, 1]);
  });

  it('sends them one per outcome when they differ', () => {
    const { values } = recordOutcomes(
      n,
      [pair('e1', 'a'), pair('e1', 'b', { status: 'failed', retryInMs: 1500, error: 'boom' })],
      TOKEN,
      { fenced: true },
    );
    expect(values[1]).toEqual(['delivered', 'failed']);
    expect(values[4]).toEqual([0, 1500]);
    // the same attempt still goes once
    expect(values.slice(18)).toEqual([null, null, 1]);
  });

  it('sends no attempt for leased delivery rows, whose attempt is on the row', () => {
    const row: DeliveryOutcome = {
      deliveryId: '42',
      status: 'delivered',
      errorCode: null,
      error: null,
      retryInMs: 0,
    };
    const { values } = recordOutcomes(n, [row], TOKEN);
    expect(values[9]).toEqual([]);
    expect(values[20]).toBeNull();
  });
});
