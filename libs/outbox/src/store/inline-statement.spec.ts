import { escapeLiteral } from 'pg';
import { executePrepared, inlineParameters, inlineStatement, preparePrepared } from './inline-statement';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue(value: unknown): string };

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

  it('leaves bare the array elements that need no quotes, and quotes the others', () => {
    const values = [
      ['5eb0a1c4-0000-4000-8000-000000000001', 'bench.notify', 'webhook:crm', 'a_b@c+d', '', 'NULL', 'null'],
      ['a b', "it's", 'x{y}', 5, -1.5, true, undefined],
    ];
    expect(inlineStatement({ text: 'select $1::text[], $2::text[]', values })).toBe(
      `select '{5eb0a1c4-0000-4000-8000-000000000001,bench.notify,webhook:crm,a_b@c+d,"","NULL","null"}'::text[], ` +
        `'{"a b","it''s","x{y}",5,-1.5,true,NULL}'::text[]`,
    );
  });

  it('leaves arrays of other values (dates, nested arrays) to pg', () => {
    const when = new Date('2026-01-02T03:04:05.678Z');
    expect(inlineStatement({ text: 'select $1', values: [[when]] })).toBe(
      `select ${escapeLiteral(prepareValue([when]))}`,
    );
    expect(inlineStatement({ text: 'select $1', values: [[['a'], ['b']]] })).toBe(`select '{{"a"},{"b"}}'`);
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

describe('inlineParameters', () => {
  it('writes every value as the quoted text pg would send as a parameter', () => {
    const when = new Date('2026-01-02T03:04:05.678Z');
    const inlined = inlineParameters('insert into t values ($1, $2, $3, $4, $5, $6, $7)', [
      `it's`,
      -5,
      true,
      null,
      when,
      ['a', null],
      { k: 'v' },
    ]);
    expect(inlined).toBe(
      `insert into t values ('it''s', '-5', 'true', null, ${escapeLiteral(prepareValue(when))}, '{"a",NULL}', '{"k":"v"}')`,
    );
  });

  it('keeps quoted identifiers and does not re-read parameters inside values', () => {
    expect(inlineParameters('select "col" from "t" where a = $2 and b = $1', ['$2', 'x'])).toBe(
      `select "col" from "t" where a = 'x' and b = '$2'`,
    );
  });

  it.each([
    ['a single quote', `select 'a' || $1`, ['x']],
    ['a semicolon', 'select $1; select 2', ['x']],
    ['a line comment', 'select $1 -- note\n', ['x']],
    ['a block comment', 'select /* $1 */ $1', ['x']],
    ['dollar quoting', 'select $$a$$ || $1', ['x']],
    ['a $ inside an identifier', 'select a$1 from t where b = $1', ['x']],
    ['a $ inside a quoted identifier', 'select "a $1" from t', ['x']],
    ['an unclosed quoted identifier', 'select "a from t where b = $1', ['x']],
    ['a missing value', 'select $2', ['x']],
    ['a Buffer (sent in binary)', 'select $1', [Buffer.from('ab')]],
    ['a NUL character (PostgreSQL refuses it)', 'select $1', ['a\u0000b']],
  ])('refuses %s', (_, text, values) => {
    expect(inlineParameters(text, values)).toBeNull();
  });

  it('passes a query without parameters through', () => {
    expect(inlineParameters('savepoint typeorm_1', undefined)).toBe('savepoint typeorm_1');
  });
});

describe('preparePrepared / executePrepared', () => {
  const statement = {
    text: `select $1::int + 1 where 'it''s' <> $2`,
    values: [-5, `it's`],
    prepared: { name: 'outbox_t_0123456789ab', types: ['int', 'text'] },
  };

  it('executes with the values written as literals, in order', () => {
    expect(executePrepared(statement)).toBe(`execute outbox_t_0123456789ab((-5), 'it''s')`);
  });

  it('prepares in a do block whose strings hold the text exactly, quotes included', () => {
    const block = preparePrepared(statement);
    expect(block).toContain(`execute 'deallocate outbox_t_0123456789ab'`);
    expect(block).toContain(
      `execute 'prepare outbox_t_0123456789ab(int, text) as select $1::int + 1 where ''it''''s'' <> $2'`,
    );
  });

  it('refuses values that do not match the parameters, and names that are not plain identifiers', () => {
    expect(() => executePrepared({ ...statement, values: [1] })).toThrow(/takes 2 values, got 1/);
    expect(() => preparePrepared({ ...statement, prepared: { name: 'x; drop', types: [] } })).toThrow(
      /not a prepared statement name/,
    );
    expect(() => executePrepared({ text: 'select 1', values: [] })).toThrow(/not a prepared statement name/);
  });
});
