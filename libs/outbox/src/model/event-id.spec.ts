import { parse, stringify, validate, version } from 'uuid';
import { EventIds } from './event-id';

describe('EventIds', () => {
  it('makes canonical, lowercase UUIDv7 texts, as uuid formats their bytes', () => {
    const ids = new EventIds();
    for (let i = 0; i < 1000; i++) {
      const id = ids.next();
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(validate(id)).toBe(true);
      expect(version(id)).toBe(7);
      expect(stringify(parse(id))).toBe(id);
    }
  });

  it('increases strictly, within a millisecond too, across instances', () => {
    const a = new EventIds();
    const b = new EventIds();
    let last = '';
    for (let i = 0; i < 20_000; i++) {
      const id = (i % 3 === 0 ? b : a).next();
      expect(id > last).toBe(true);
      last = id;
    }
  });

  it('carries the current time in its first 48 bits', () => {
    const before = Date.now();
    const id = new EventIds().next();
    const after = Date.now();
    const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after + 1);
  });
});
