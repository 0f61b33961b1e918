import { inlineStatement } from './inline-statement';

describe('inlineStatement', () => {
  it('replaces each $n with the literal of its value, $10 included', () => {
    const values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 'ten'];
    expect(inlineStatement({ text: 'select $1, $10, $2', values })).toBe(`select 1, 'ten', 2`);
  });

  it('escapes quotes and backslashes so a string cannot end its literal', () => {
    expect(inlineStatement({ text: 'select $1', values: [`it's`] })).toBe(`select 'it''s'`);
    // pg's escapeLiteral writes an E'' string (with a leading space) when there is a backslash
    expect(inlineStatement({ text: 'select $1', values: ['a\\b'] })).toBe(`select  E'a\\\\b'`);
  });

  it('writes arrays as array literals, with nulls, and null as null', () => {
    expect(inlineStatement({ text: 'select $1::text[], $2', values: [['a"b', null, 'c,d'], null] })).toBe(
      `select  E'{"a\\\\"b",NULL,"c,d"}'::text[], null`,
    );
  });

  it('keeps a negative number from turning a minus into a comment', () => {
    expect(inlineStatement({ text: 'select 1 -$1', values: [-5] })).toBe('select 1 -(-5)');
  });

  it('replaces NUL characters, which PostgreSQL text cannot hold', () => {
    expect(inlineStatement({ text: 'select $1', values: ['a\u0000b'] })).toBe(`select 'a\uFFFDb'`);
  });

  it('does not re-read parameters inside the values it inlined', () => {
    expect(inlineStatement({ text: 'select $1, $2', values: ['$2', 'x'] })).toBe(`select '$2', 'x'`);
  });

  it('refuses a statement that names a value it was not given', () => {
    expect(() => inlineStatement({ text: 'select $2', values: [1] })).toThrow('no value for $2');
  });

  it('refuses numbers PostgreSQL cannot read', () => {
    expect(() => inlineStatement({ text: 'select $1', values: [Number.NaN] })).toThrow('NaN');
  });
});
