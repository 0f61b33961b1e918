import { matchesPayload } from './payload-matcher';

describe('matchesPayload', () => {
  const payload = {
    contactId: 'c1',
    name: 'Ada',
    address: { city: 'London', zip: 'N1' },
    tags: ['vip', 'new'],
  };

  it('matches the keys a partial value names, at every depth', () => {
    expect(matchesPayload(payload, { name: 'Ada' })).toBe(true);
    expect(matchesPayload(payload, { address: { city: 'London' } })).toBe(true);
    expect(matchesPayload(payload, { address: { city: 'Paris' } })).toBe(false);
    expect(matchesPayload(payload, { missing: undefined })).toBe(true);
    expect(matchesPayload(payload, { missing: null })).toBe(false);
  });

  it('compares arrays element by element, with their length', () => {
    expect(matchesPayload(payload, { tags: ['vip', 'new'] })).toBe(true);
    expect(matchesPayload(payload, { tags: ['vip'] })).toBe(false);
    expect(matchesPayload([{ a: 1, b: 2 }], [{ a: 1 }])).toBe(true);
  });

  it('takes a predicate, which must return true', () => {
    expect(matchesPayload(payload, (p: typeof payload) => p.tags.includes('vip'))).toBe(true);
    expect(matchesPayload(payload, () => 1 as unknown as boolean)).toBe(false);
  });

  it('compares other values by deep equality, types included', () => {
    expect(matchesPayload(1, 1)).toBe(true);
    expect(matchesPayload('1', 1)).toBe(false);
    expect(matchesPayload(payload, 'Ada')).toBe(false);
    expect(matchesPayload(null, {})).toBe(false);
  });
});
