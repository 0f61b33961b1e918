import { fromFanOut, type FanOutResult } from './claimed-delivery';

const TENANT = '5eb0a1c4-0000-4000-8000-000000000001';

function event(eventId: string, seq: string) {
  return {
    event_id: eventId,
    tenant_id: TENANT,
    event_name: 'crm.contact.created.v1',
    payload: { contactId: eventId },
    aggregate_type: 'contact',
    aggregate_id: eventId,
    occurred_at: '2026-11-29T12:00:00.123+00:00',
    correlation_id: null,
    schema_version: 1,
    event_seq: seq,
  };
}

function lease(
  eventId: string,
  claims: number,
  seq: string,
  pairs: string[],
): FanOutResult['leases'][number] {
  return { ...event(eventId, seq), claim_count: claims, pairs: pairs.join(' ') };
}

function result(parts: Partial<FanOutResult>): FanOutResult {
  return { deliveries: [], leases: [], written: [], lost: 0, ...parts };
}

describe('fromFanOut', () => {
  it('gives each pair its leased event and claim count as attempt, in the order of the leases', () => {
    const { deliveries, events, lost } = fromFanOut(
      result({ leases: [lease('e1', 1, '10', ['b', 'a']), lease('e2', 3, '11', ['a'])] }),
    );
    expect(
      deliveries.map((d) => [d.event.eventId, d.consumerName, d.attempt, d.recovered, d.eventSeq]),
    ).toEqual([
      ['e1', 'b', 1, false, '10'],
      ['e1', 'a', 1, false, '10'],
      ['e2', 'a', 3, true, '11'],
    ]);
    expect(deliveries[0]!.event).toMatchObject({
      tenantId: TENANT,
      data: { contactId: 'e1' },
      schemaVersion: 1,
      occurredAt: new Date('2026-11-29T12:00:00.123Z'),
    });
    // one envelope per event, shared by its consumers
    expect(deliveries[1]!.event).toBe(deliveries[0]!.event);
    expect(deliveries.every((d) => d.deliveryId === null)).toBe(true);
    expect({ events, lost }).toEqual({ events: 2, lost: 0 });
  });

  it('puts leased delivery rows first, at attempt 1, with their ids', () => {
    const { deliveries } = fromFanOut(
      result({
        deliveries: [{ ...event('e2', '11'), delivery_id: '7', consumer_name: 'hook' }],
        leases: [lease('e1', 1, '10', ['a'])],
        written: ['e2'],
      }),
    );
    expect(deliveries.map((d) => [d.deliveryId, d.consumerName, d.attempt, d.eventId])).toEqual([
      ['7', 'hook', 1, 'e2'],
      [null, 'a', 1, 'e1'],
    ]);
    expect(deliveries[0]!.event.occurredAt).toEqual(new Date('2026-11-29T12:00:00.123Z'));
  });

  it('counts events locked under another lease as lost, with no deliveries', () => {
    const { deliveries, events, lost } = fromFanOut(
      result({ leases: [lease('e1', 1, '10', ['a'])], lost: 1 }),
    );
    expect(deliveries.map((d) => d.event.eventId)).toEqual(['e1']);
    expect({ events, lost }).toEqual({ events: 1, lost: 1 });
  });

  it('counts an event once when it is both leased (pairs) and written (rows for other consumers)', () => {
    const { events, deliveries } = fromFanOut(
      result({ leases: [lease('e1', 1, '10', ['a'])], written: ['e1', 'e2'] }),
    );
    expect(events).toBe(2);
    expect(deliveries).toHaveLength(1);
  });
});
