import { fromFanOut, type FanOutRow } from './claimed-delivery';

const TENANT = '5eb0a1c4-0000-4000-8000-000000000001';

function leaseRow(eventId: string, claims: number, seq: string, pairs: string[]): FanOutRow {
  return {
    kind: 'lease',
    delivery_id: null,
    consumer_name: null,
    attempt_count: claims,
    event_id: eventId,
    tenant_id: TENANT,
    event_name: 'crm.contact.created.v1',
    payload: { contactId: eventId },
    aggregate_type: 'contact',
    aggregate_id: eventId,
    occurred_at: new Date('2026-11-29T12:00:00Z'),
    correlation_id: null,
    schema_version: 1,
    event_seq: seq,
    pairs: pairs.join(' '),
  };
}

function bareRow(kind: FanOutRow['kind'], eventId: string, consumer: string | null = null): FanOutRow {
  return {
    kind,
    delivery_id: null,
    consumer_name: consumer,
    attempt_count: null,
    event_id: eventId,
    tenant_id: null as unknown as string,
    event_name: null as unknown as string,
    payload: null,
    aggregate_type: null,
    aggregate_id: null,
    occurred_at: null as unknown as Date,
    correlation_id: null,
    schema_version: null as unknown as number,
    event_seq: null,
    pairs: null,
  };
}

describe('fromFanOut', () => {
  it("gives each pair its lease row's event and claim count as attempt, in the order of the rows", () => {
    const { deliveries, events, lost } = fromFanOut([
      leaseRow('e1', 1, '10', ['b', 'a']),
      leaseRow('e2', 3, '11', ['a']),
    ]);
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
    });
    // one envelope per event, shared by its consumers
    expect(deliveries[1]!.event).toBe(deliveries[0]!.event);
    expect(deliveries.every((d) => d.deliveryId === null)).toBe(true);
    expect({ events, lost }).toEqual({ events: 2, lost: 0 });
  });

  it('counts events locked under another lease as lost, with no deliveries', () => {
    const { deliveries, events, lost } = fromFanOut([bareRow('lost', 'e9'), leaseRow('e1', 1, '10', ['a'])]);
    expect(deliveries.map((d) => d.event.eventId)).toEqual(['e1']);
    expect({ events, lost }).toEqual({ events: 1, lost: 1 });
  });

  it('counts an event once when it is both leased (pairs) and written (rows for other consumers)', () => {
    const { events, deliveries } = fromFanOut([
      leaseRow('e1', 1, '10', ['a']),
      bareRow('event', 'e1'),
      bareRow('event', 'e2'),
    ]);
    expect(events).toBe(2);
    expect(deliveries).toHaveLength(1);
  });
});
