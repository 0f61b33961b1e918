import { StartError, startFailure } from './embedded-postgres.server';

const failure = {
  port: 5433,
  dataDir: '/tmp/outbox-pg-a',
  runAs: 'user "postgres"',
  pgCtlOutput: 'waiting for server to start.... stopped waiting\npg_ctl: could not start server\n',
  logFile: '/tmp/outbox-pg-a/embedded-postgres.log',
};

describe('startFailure', () => {
  it('marks a port taken by another process, so that another free port may be tried', () => {
    const error = startFailure({
      ...failure,
      serverLog: 'LOG:  could not bind IPv4 address: Address already in use',
    });
    expect(error).toBeInstanceOf(StartError);
    expect(error.portInUse).toBe(true);
    expect(error.message).toMatch(/Check: the port is already in use/);
  });

  it('names the place, pg_ctl’s words, the server’s lines and what to check for any other failure', () => {
    const error = startFailure({ ...failure, serverLog: 'FATAL:  invalid value for parameter "work_mem"' });
    expect(error.portInUse).toBe(false);
    expect(error.message).toContain('127.0.0.1:5433');
    expect(error.message).toContain('data /tmp/outbox-pg-a, running as user "postgres"');
    expect(error.message).toContain('pg_ctl: could not start server');
    expect(error.message).toContain('FATAL:  invalid value for parameter "work_mem"');
    expect(error.message).toMatch(/Check: the data folder is readable and writable by user "postgres"/);
  });
});
