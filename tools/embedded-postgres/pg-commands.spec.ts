import { initdbArgs, PG_CTL_TIMEOUT_S, pgCtlStartArgs, pgCtlStopArgs } from './pg-commands';

describe('initdbArgs', () => {
  it('makes a UTF-8, C-locale cluster that trusts the postgres user', () => {
    const args = initdbArgs('/data/a', false);
    expect(args).toEqual(expect.arrayContaining(['-D', '/data/a', '--auth=trust', '-U', 'postgres']));
    expect(args).toEqual(expect.arrayContaining(['--encoding=UTF8', '--locale=C', '--no-instructions']));
  });

  it('skips the sync to disk for a throwaway cluster only', () => {
    expect(initdbArgs('/data/a', true)).toContain('--no-sync');
    expect(initdbArgs('/data/a', false)).not.toContain('--no-sync');
  });
});

describe('pg_ctl arguments', () => {
  it('start waits for the server, logs to the given file and passes the flags as one -o argument', () => {
    const args = pgCtlStartArgs('/data/a', '/data/a/server.log', "'-c' 'port=5433'");
    expect(args.slice(0, 2)).toEqual(['start', '-w']);
    expect(args).toEqual(expect.arrayContaining(['-t', String(PG_CTL_TIMEOUT_S), '-D', '/data/a']));
    expect(args.slice(-4)).toEqual(['-l', '/data/a/server.log', '-o', "'-c' 'port=5433'"]);
  });

  it('stop waits in the given mode, for the default timeout unless told another', () => {
    expect(pgCtlStopArgs('/data/a', 'immediate')).toEqual([
      'stop',
      '-w',
      '-t',
      String(PG_CTL_TIMEOUT_S),
      '-m',
      'immediate',
      '-D',
      '/data/a',
    ]);
    expect(pgCtlStopArgs('/data/a', 'fast', 10)).toEqual([
      'stop',
      '-w',
      '-t',
      '10',
      '-m',
      'fast',
      '-D',
      '/data/a',
    ]);
  });
});
