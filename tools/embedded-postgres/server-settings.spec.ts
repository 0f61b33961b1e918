import { spawnSync } from 'node:child_process';
import { checkPort, DEFAULT_SETTINGS, mergeSettings, serverFlags } from './server-settings';

describe('mergeSettings', () => {
  it('keeps the server on loopback over TCP only unless told otherwise', () => {
    expect(mergeSettings(undefined)).toEqual({
      listen_addresses: '127.0.0.1',
      unix_socket_directories: '',
      max_connections: '200',
    });
  });

  it('lets a caller override a default and add a setting with a dotted name', () => {
    const settings = mergeSettings({ max_connections: '50', 'auto_explain.log_min_duration': '0' });
    expect(settings).toMatchObject({ max_connections: '50', 'auto_explain.log_min_duration': '0' });
    expect(settings.listen_addresses).toBe(DEFAULT_SETTINGS.listen_addresses);
  });

  it('refuses a setting name that could smuggle another flag, naming it', () => {
    expect(() => mergeSettings({ 'fsync=off -c x': 'y' })).toThrow(/invalid setting name "fsync=off -c x"/);
    expect(() => mergeSettings({ '1st': 'y' })).toThrow(/invalid setting name "1st"/);
  });

  it('sends the port to options.port', () => {
    expect(() => mergeSettings({ port: '5433' })).toThrow(/options\.port, not settings\.port/);
  });
});

describe('checkPort', () => {
  it('accepts no port (a free one is picked) and every TCP port number', () => {
    for (const port of [undefined, 1, 5432, 65535]) expect(() => checkPort(port)).not.toThrow();
  });

  it('refuses what is not a TCP port number, naming it', () => {
    for (const port of [0, -1, 65536, 54.32, Number.NaN]) {
      expect(() => checkPort(port)).toThrow(`embedded PostgreSQL: invalid port ${port}`);
    }
  });
});

describe('serverFlags', () => {
  /** What /bin/sh makes of the flags, as pg_ctl hands them to it: one word a line. */
  function wordsAfterShell(flags: string): string[] {
    const result = spawnSync('/bin/sh', ['-c', `printf '%s\\n' ${flags}`], { encoding: 'utf8' });
    expect(result.status).toBe(0);
    return result.stdout.split('\n').slice(0, -1);
  }

  it('reaches the server as -c name=value words, whatever the values hold', () => {
    const settings = {
      application_name: 'it\'s $HOME `id` \\ "quoted"',
      search_path: 'a, b',
      unix_socket_directories: '',
    };
    expect(wordsAfterShell(serverFlags(settings))).toEqual([
      '-c',
      'application_name=it\'s $HOME `id` \\ "quoted"',
      '-c',
      'search_path=a, b',
      '-c',
      'unix_socket_directories=',
    ]);
  });

  it('is empty for no settings', () => {
    expect(serverFlags({})).toBe('');
  });
});
