import { handlerSqlEffects, HandlerSqlReader } from './handler-sql';

const control = (text: string): string | null => handlerSqlEffects(text).transactionControl;

describe('handlerSqlEffects', () => {
  it.each([
    ['commit', 'commit'],
    ['  COMMIT WORK', 'commit work'],
    ['rollback', 'rollback'],
    ['begin', 'begin'],
    ['start transaction isolation level serializable', 'start transaction isolation level serializable'],
    ['end', 'end'],
    ['abort', 'abort'],
    ["prepare transaction 'x'", 'prepare transaction '],
    ['insert into t values (1); commit', 'commit'],
    ['select 1;\n-- a comment\n rollback', 'rollback'],
    ['release savepoint outbox_h0', 'release savepoint outbox_h0'],
    ['rollback to savepoint outbox_h1', 'rollback to savepoint outbox_h1'],
    ['savepoint outbox_h9', 'savepoint outbox_h9'],
  ])('finds transaction control in %j', (text, found) => {
    expect(control(text)).toBe(found);
  });

  it.each([
    'select 1',
    "select 'commit; rollback'",
    "select E'it\\'s; commit'",
    'select "commit" from t',
    'do $$ begin perform 1; end $$',
    'create function f() returns void language plpgsql as $body$ begin commit; end $body$',
    '/* commit; /* nested */ rollback; */ select 1',
    '-- commit\nselect 1',
    'savepoint typeorm_1',
    'release savepoint typeorm_1',
    'ROLLBACK TO SAVEPOINT typeorm_1',
    'rollback transaction to typeorm_2',
    'update t set begin_at = now()',
  ])('finds none in %j', (text) => {
    expect(control(text)).toBeNull();
  });

  it('says which statements may change settings', () => {
    const changes = (text: string): boolean => handlerSqlEffects(text).changesSettings;
    expect(changes('set role other')).toBe(true);
    expect(changes('SET LOCAL statement_timeout = 0')).toBe(true);
    expect(changes('reset all')).toBe(true);
    expect(changes('discard plans')).toBe(true);
    expect(changes("select set_config('app.current_tenant_id', $1, false)")).toBe(true);
    expect(changes('select 1; set search_path = x')).toBe(true);
    expect(changes('update t set x = 1')).toBe(false);
    expect(changes("select 'set role x'")).toBe(false);
  });
});

describe('HandlerSqlReader', () => {
  it('answers as handlerSqlEffects does, for a text it read before and for one past its length limit', () => {
    const reader = new HandlerSqlReader();
    const long = `select '${'x'.repeat(5_000)}'; commit`;
    for (const text of ['insert into t values ($1)', 'set role app; select 1', 'commit', long]) {
      expect(reader.read(text)).toEqual(handlerSqlEffects(text));
      expect(reader.read(text)).toEqual(handlerSqlEffects(text));
    }
  });

  it('keeps a bounded number of texts, dropping the oldest first', () => {
    const reader = new HandlerSqlReader();
    const known = (reader as unknown as { known: Map<string, unknown> }).known;
    for (let i = 0; i < 2_000; i++) reader.read(`select ${i}`);
    expect(known.size).toBe(512);
    expect(known.has('select 0')).toBe(false);
    expect(known.has('select 1999')).toBe(true);
    expect(reader.read('select 1; rollback').transactionControl).toBe('rollback');
  });
});
