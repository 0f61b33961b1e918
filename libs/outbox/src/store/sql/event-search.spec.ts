import { outboxNames } from '../../model/table-names';
import { searchEvents } from './event-search';

const TENANT = '11111111-1111-4111-8111-111111111111';

describe('the search statement', () => {
  it('put the conditions of the fields given in the text, and their values only in the values', () => {
    const search = searchEvents(outboxNames(), {
      tenantId: TENANT,
      eventId: null,
      aggregateType: "o'; drop table x; --",
      aggregateId: 'O-1',
      correlationId: null,
      eventName: null,
      beforeId: null,
      limit: 51,
    });
    expect(search.text).toContain('e.aggregate_id = $3::text');
    expect(search.text).toContain('e.aggregate_type = $4::text');
    expect(search.text).not.toMatch(/correlation_id =|event_name =|e\.id [=<]/);
    expect(search.text).not.toContain('drop table');
    expect(search.values).toEqual([TENANT, 51, 'O-1', "o'; drop table x; --"]);
    expect(new Set(search.text.match(/\$\d+/g)).size).toBe(search.values.length);
  });
});
