import { currentSqlFiles, expectedSqlFiles } from './migration-sql-files';

describe('the SQL files shipped in libs/outbox/sql', () => {
  it('are exactly what the migration classes send (run `npm run sql:lib` after adding a migration)', async () => {
    const expected = await expectedSqlFiles();
    const current = currentSqlFiles();
    expect([...current.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [name, content] of expected)
      expect({ name, content: current.get(name) }).toEqual({ name, content });
  });
});
