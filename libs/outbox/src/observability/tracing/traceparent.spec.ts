import { formatTraceParent, parseTraceParent } from './traceparent';

describe('traceparent', () => {
  it('formats and parses a W3C traceparent', () => {
    const value = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const parsed = parseTraceParent(value);
    expect(parsed).toEqual({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: 1,
    });
    expect(formatTraceParent(parsed!)).toBe(value);
    expect(formatTraceParent({ ...parsed!, traceFlags: 0 })).toMatch(/-00$/);
  });

  it('refuses what is not one: absent, malformed, other versions, all-zero ids', () => {
    for (const bad of [
      null,
      undefined,
      '',
      'garbage',
      '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      '00-00000000000000000000000000000000-b7ad6b7169203331-01',
      '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01',
      '00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01',
    ])
      expect(parseTraceParent(bad)).toBeNull();
  });
});
