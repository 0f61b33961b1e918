import { childEnv } from './run-as';

describe('childEnv', () => {
  it('keeps the caller’s PG* variables from the server and keeps the rest', () => {
    const env = childEnv({
      PATH: '/usr/bin',
      PGDATA: '/elsewhere',
      PGPORT: '5432',
      HOME: '/root',
      LANG: 'C',
    });
    expect(env).toEqual({ PATH: '/usr/bin', HOME: '/root', LANG: 'C' });
  });
});
