import { isPostmasterOf, postmasterPid, relocatedClusterName } from './data-folder';

describe('relocatedClusterName', () => {
  it('is the same on every run from one requested folder, and tells two folders of one name apart', () => {
    const name = relocatedClusterName('/root/project/.data/demo-postgres');
    expect(name).toMatch(/^demo-postgres-[0-9a-f]{12}$/);
    expect(relocatedClusterName('/root/project/.data/demo-postgres')).toBe(name);
    expect(relocatedClusterName('/root/other/.data/demo-postgres')).not.toBe(name);
  });
});

describe('postmasterPid', () => {
  it('reads the PID on the first line of postmaster.pid', () => {
    expect(postmasterPid('4242\n/tmp/outbox-pg-x\n1764590000\n5432\n')).toBe(4242);
  });

  it('finds none in a missing, empty, torn or nonsensical file', () => {
    for (const content of [null, '', '\n', 'abc\n', '0\n', '-7\n']) expect(postmasterPid(content)).toBeNull();
  });
});

describe('isPostmasterOf', () => {
  it('recognises a PostgreSQL server of this cluster from its command line', () => {
    const command = '/x/native/bin/postgres -D /tmp/outbox-pg-a -c port=5433';
    expect(isPostmasterOf(command, '/tmp/outbox-pg-a')).toBe(true);
  });

  it('takes a reused PID (another program, or a server of another cluster) for something else', () => {
    expect(isPostmasterOf('/usr/bin/node server.js', '/tmp/outbox-pg-a')).toBe(false);
    expect(isPostmasterOf('/x/bin/postgres -D /tmp/outbox-pg-b', '/tmp/outbox-pg-a')).toBe(false);
  });
});
