import { outboxNames } from '../../model/table-names';
import { countReplayable, purgeChunk, replayChunk, type BulkFilter } from './bulk-actions';

const NAMES = outboxNames();
const TENANT = '11111111-1111-4111-8111-111111111111';
const NONE: BulkFilter = {
  tenantId: TENANT,
  consumer: null,
  statuses: ['dead'],
  eventName: null,
  from: null,
  to: null,
};

/** The `$n` placeholders of a statement's text, each once. */
const placeholders = (text: string) => [...new Set(text.match(/\$\d+/g))];

describe('the bulk statements', () => {
  it('join the events only when the filter names them, and start a chunk after the last id only when given', () => {
    expect(countReplayable(NAMES, NONE).text).not.toContain('join');
    const dated = countReplayable(NAMES, { ...NONE, from: new Date(0) });
    expect(dated.text).toContain('join');
    expect(dated.values).toEqual([TENANT, ['dead'], new Date(0)]);

    const first = replayChunk(NAMES, { ...NONE, consumer: 'billing', afterId: null, chunkSize: 3 });
    expect(first.text).not.toContain('d.id >');
    expect(first.values).toEqual([TENANT, ['dead'], 'billing', 3]);
    const next = replayChunk(NAMES, { ...NONE, afterId: '42', chunkSize: 3 });
    expect(next.text).toContain('d.id > $3::bigint');
    expect(next.values).toEqual([TENANT, ['dead'], '42', 3]);

    const purge = purgeChunk(NAMES, {
      ...NONE,
      eventName: 'a.b.v1',
      afterId: '0193a1b2-0000-7000-8000-000000000000',
      chunkSize: 9,
    });
    expect(purge.text).toContain('e.event_name = $2::text');
    expect(purge.text).toContain('e.id > $3::uuid');
    expect(placeholders(purge.text)).toHaveLength(purge.values.length);
  });
});
