import { parsePgClusters } from './machine';
import { planSetUp, REQUIREMENTS, type MachineState } from './test-requirements';

const EVERYTHING = new Set(REQUIREMENTS.flatMap((r) => r.executables));
const BROKERS = new Set(['127.0.0.1:5672', '127.0.0.1:4222']);

function machine(overrides: Partial<MachineState> = {}): MachineState {
  return {
    debian: true,
    root: true,
    executables: EVERYTHING,
    offPath: new Map(),
    listening: BROKERS,
    clusters: [],
    ...overrides,
  };
}

function without(...executables: string[]): Set<string> {
  return new Set([...EVERYTHING].filter((e) => !executables.includes(e)));
}

describe('planSetUp', () => {
  it('has nothing to do when every package is installed and every broker listens', () => {
    expect(planSetUp(machine())).toEqual({ install: [], start: [], problems: [] });
  });

  it('installs what is missing on Debian as root, and says why', () => {
    const plan = planSetUp(machine({ executables: without('/usr/bin/chromium', '/usr/sbin/pgbouncer') }));
    expect(plan.install.map((r) => r.package)).toEqual(['chromium', 'pgbouncer']);
    expect(plan.install[0]!.why).toContain('browser test');
    expect(plan).toMatchObject({ start: [], problems: [] });
  });

  it('installs a broker and then starts it', () => {
    const plan = planSetUp(
      machine({ executables: without('nats-server'), listening: new Set(['127.0.0.1:5672']) }),
    );
    expect(plan.install.map((r) => r.package)).toEqual(['nats-server']);
    expect(plan.start.map((s) => s.name)).toEqual(['NATS']);
  });

  it('starts a broker that is installed but down, with the commands of the machine', () => {
    const plan = planSetUp(machine({ listening: new Set(['127.0.0.1:4222']) }));
    expect(plan.install).toEqual([]);
    expect(plan.start).toEqual([
      expect.objectContaining({
        name: 'RabbitMQ',
        port: 5672,
        start: expect.arrayContaining([['rabbitmq-server', '-detached']]),
      }),
    ]);
  });

  it('installs nothing when not root: it names each package and the command that installs it', () => {
    const plan = planSetUp(
      machine({ root: false, executables: without('/usr/bin/chromium', '/usr/sbin/pgbouncer') }),
    );
    expect(plan.install).toEqual([]);
    expect(plan.problems).toHaveLength(2);
    expect(plan.problems[0]).toContain('chromium is not installed');
    expect(plan.problems[0]).toContain('`sudo apt-get install -y --no-install-recommends chromium`');
    expect(plan.problems[1]).toContain('`sudo apt-get install -y --no-install-recommends pgbouncer`');
  });

  it('names the package and the Debian command on another system, even as root', () => {
    const plan = planSetUp(machine({ debian: false, executables: without('/usr/sbin/pgbouncer') }));
    expect(plan.install).toEqual([]);
    expect(plan.problems).toEqual([expect.stringContaining('this is not Debian')]);
    expect(plan.problems[0]).toContain('`apt-get install -y --no-install-recommends pgbouncer`');
  });

  it('says how to start a broker that is down when not root, and does not start it', () => {
    const plan = planSetUp(machine({ root: false, listening: new Set(['127.0.0.1:5672']) }));
    expect(plan.start).toEqual([]);
    expect(plan.problems).toEqual([expect.stringContaining('NATS is not listening on 127.0.0.1:4222')]);
    expect(plan.problems[0]).toContain('start-stop-daemon --start');
  });

  it('reports a missing broker once (not installed), not also as down', () => {
    const plan = planSetUp(
      machine({
        root: false,
        executables: without('rabbitmq-server', 'rabbitmqctl'),
        listening: new Set(['127.0.0.1:4222']),
      }),
    );
    expect(plan.problems).toEqual([expect.stringContaining('rabbitmq-server is not installed')]);
  });

  it('says which folder to add to PATH when a server is installed but not on PATH, rather than install it again', () => {
    const plan = planSetUp(
      machine({
        root: false,
        executables: without('rabbitmq-server', 'rabbitmqctl', 'nats-server'),
        offPath: new Map([
          ['rabbitmq-server', '/usr/sbin'],
          ['rabbitmqctl', '/usr/sbin'],
          ['nats-server', '/usr/sbin'],
        ]),
      }),
    );
    expect(plan.install).toEqual([]);
    expect(plan.problems).toEqual([
      expect.stringContaining('rabbitmq-server is installed in /usr/sbin, which is not on PATH'),
      expect.stringContaining('export PATH="$PATH:/usr/sbin"'),
    ]);
  });

  describe('DATABASE_URL', () => {
    const cluster = { version: '15', name: 'main', port: 5432 };

    it('leaves an embedded run (no DATABASE_URL) and a listening server alone', () => {
      expect(planSetUp(machine({ clusters: [cluster] })).start).toEqual([]);
      const listening = new Set([...BROKERS, '127.0.0.1:5432']);
      const plan = planSetUp(machine({ databaseUrl: 'postgres://postgres@127.0.0.1:5432/test', listening }));
      expect(plan).toEqual({ install: [], start: [], problems: [] });
    });

    it("starts the machine's cluster on the URL's port when it is down", () => {
      const plan = planSetUp(
        machine({
          databaseUrl: 'postgres://postgres@localhost/test',
          clusters: [{ ...cluster, port: 5433 }, cluster],
        }),
      );
      expect(plan.start).toEqual([
        {
          name: 'PostgreSQL 15/main',
          host: '127.0.0.1',
          port: 5432,
          start: [['pg_ctlcluster', '--skip-systemctl-redirect', '15', 'main', 'start']],
        },
      ]);
    });

    it('fails with the command when not root, and with the way out when no cluster has that port', () => {
      const url = 'postgres://postgres@127.0.0.1:5432/test';
      const notRoot = planSetUp(machine({ root: false, databaseUrl: url, clusters: [cluster] }));
      expect(notRoot.problems).toEqual([
        expect.stringContaining('(pg_ctlcluster --skip-systemctl-redirect 15 main start)'),
      ]);
      const noCluster = planSetUp(machine({ databaseUrl: url }));
      expect(noCluster.start).toEqual([]);
      expect(noCluster.problems).toEqual([expect.stringContaining('unset DATABASE_URL')]);
    });

    it('does not probe or start a server on another host', () => {
      const plan = planSetUp(
        machine({ databaseUrl: 'postgres://app@db.internal:5432/test', clusters: [cluster] }),
      );
      expect(plan).toEqual({ install: [], start: [], problems: [] });
    });

    it('refuses a DATABASE_URL that is not a URL', () => {
      expect(planSetUp(machine({ databaseUrl: '127.0.0.1:5432/test' })).problems).toEqual([
        expect.stringContaining('DATABASE_URL is not a URL'),
      ]);
    });
  });
});

describe('parsePgClusters', () => {
  it("reads pg_lsclusters' version, name and port", () => {
    const output =
      '15 main 5432 online postgres /var/lib/postgresql/15/main /var/log/postgresql/postgresql-15-main.log\n' +
      '16 test 5433 down   postgres /var/lib/postgresql/16/test /var/log/postgresql/postgresql-16-test.log\n';
    expect(parsePgClusters(output)).toEqual([
      { version: '15', name: 'main', port: 5432 },
      { version: '16', name: 'test', port: 5433 },
    ]);
  });
});
