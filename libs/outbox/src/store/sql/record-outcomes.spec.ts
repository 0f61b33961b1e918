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

  it('makes no array for a column with no value: one outcome delivered sends the shared empty one', () => {
    const { values } = recordOutcomes(n, [pair('e1', 'a')], TOKEN, { fenced: true });
    // $1 (delivery ids), $2 (status, sent once), $3, $4, $5 (retry, sent once), $7, $10 (attempt, sent once),
    // $11 (tenants, sent once), $17, $18: all empty, and one array (a fresh one each made 2 KB per statement)
    const empty = [0, 1, 2, 3, 4, 6, 9, 10, 16, 17].map((at) => values[at]);
    expect(empty).toEqual(Array(10).fill([]));
    expect(new Set(empty).size).toBe(1);
    expect(Object.isFrozen(empty[0])).toBe(true);
    // the pair's own columns: one value each
    expect([values[7], values[8], values[11]]).toEqual([['e1'], ['a'], ['7']]);
  });
});
