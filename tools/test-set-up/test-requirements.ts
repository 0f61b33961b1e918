/**
 * What the test suite needs from the machine that `npm install` does not bring, and what to do about each missing
 * piece. Pure: the caller probes the machine ({@link MachineState}) and acts on the {@link SetUpPlan}.
 */

/** A server the specs connect to, and the commands (as root) that start it when it is down. */
export interface Service {
  name: string;
  host: string;
  port: number;
  /** Run in order; a failing command is only reported: the port then tells whether the server is up. */
  start: readonly (readonly string[])[];
}

/** A Debian package the specs use. */
export interface Requirement {
  package: string;
  /** Which specs need it, for the line that says what is installed and why. */
  why: string;
  /** Absolute paths, or names looked up on PATH, as the specs look them up. */
  executables: readonly string[];
  /** The server of the package the specs connect to on its usual port. */
  service?: Service;
}

// The start commands are those of the machine's kind (docs/getting-started.md#running-this-repository).
const RABBITMQ: Service = {
  name: 'RabbitMQ',
  host: '127.0.0.1',
  port: 5672,
  start: [
    ['rabbitmq-server', '-detached'],
    ['timeout', '120', 'rabbitmqctl', 'await_startup'],
  ],
};

const NATS: Service = {
  name: 'NATS',
  host: '127.0.0.1',
  port: 4222,
  start: [
    ['mkdir', '-p', '/var/lib/nats-server'],
    [
      'start-stop-daemon',
      '--start',
      '--oknodo',
      '--background',
      '--exec',
      '/usr/sbin/nats-server',
      '--',
      '-a',
      '127.0.0.1',
      '-p',
      '4222',
      '-js',
      '-sd',
      '/var/lib/nats-server',
      '-l',
      '/var/log/nats-server.log',
    ],
  ],
};

export const REQUIREMENTS: readonly Requirement[] = [
  {
    package: 'chromium',
    why: "the board's browser test drives /usr/bin/chromium",
    executables: ['/usr/bin/chromium'],
  },
  {
    package: 'pgbouncer',
    why: 'the PgBouncer test runs /usr/sbin/pgbouncer',
    executables: ['/usr/sbin/pgbouncer'],
  },
  {
    package: 'rabbitmq-server',
    why: 'the broker and inbox specs use RabbitMQ on 127.0.0.1:5672 and rabbitmqctl',
    executables: ['rabbitmq-server', 'rabbitmqctl'],
    service: RABBITMQ,
  },
  {
    package: 'nats-server',
    why: 'the broker specs run nats-server, the inbox specs use the one on 127.0.0.1:4222',
    executables: ['nats-server'],
    service: NATS,
  },
];

/** A PostgreSQL cluster of Debian's postgresql-common (`pg_lsclusters`). */
export interface PgCluster {
  version: string;
  name: string;
  port: number;
}

/** What the probe found. */
export interface MachineState {
  /** Debian (or a derivative) with apt-get. */
  debian: boolean;
  root: boolean;
  /** The executables of {@link REQUIREMENTS} that were found. */
  executables: ReadonlySet<string>;
  /** Executables named without a path that are not on PATH but in one of the sbin folders, with that folder. */
  offPath: ReadonlyMap<string, string>;
  /** `host:port` pairs that accept a connection. */
  listening: ReadonlySet<string>;
  /** `DATABASE_URL`, when set: the specs then use that server instead of an embedded one. */
  databaseUrl?: string;
  /** The machine's clusters; probed only when `DATABASE_URL` names a loopback server that is down. */
  clusters: readonly PgCluster[];
}

export interface SetUpPlan {
  /** Packages to install with apt-get. */
  install: Requirement[];
  /** Servers to start (after the install). */
  start: Service[];
  /** What cannot be provisioned here, each with the command that does it. */
  problems: string[];
}

/** Decides what to install and start, or why that cannot be done here. Nothing missing gives an empty plan. */
export function planSetUp(state: MachineState): SetUpPlan {
  const plan: SetUpPlan = { install: [], start: [], problems: [] };
  const installable = state.debian && state.root;
  for (const requirement of REQUIREMENTS) {
    const missing = requirement.executables.filter((executable) => !state.executables.has(executable));
    const offPath = missing.filter((executable) => state.offPath.has(executable));
    if (offPath.length > 0) {
      plan.problems.push(notOnPath(requirement, offPath, state));
      continue;
    }
    if (missing.length > 0 && !installable) {
      plan.problems.push(notInstalled(requirement, missing, state));
      continue;
    }
    if (missing.length > 0) plan.install.push(requirement);
    const service = requirement.service;
    if (service && !state.listening.has(address(service))) {
      if (state.root) plan.start.push(service);
      else plan.problems.push(notRunning(service, requirement.why));
    }
  }
  const database = databaseService(state);
  if (typeof database === 'string') plan.problems.push(database);
  else if (database) plan.start.push(database);
  return plan;
}

export function address({ host, port }: { host: string; port: number }): string {
  return `${host}:${port}`;
}

/** The loopback server `DATABASE_URL` names, when it is down; a string when it cannot be started from here. */
export function databaseService(state: MachineState): Service | string | null {
  const target = databaseTarget(state.databaseUrl);
  if (typeof target === 'string' || target === null) return target;
  if (state.listening.has(address(target))) return null;
  const cluster = state.clusters.find((candidate) => candidate.port === target.port);
  const start = cluster && [
    ['pg_ctlcluster', '--skip-systemctl-redirect', cluster.version, cluster.name, 'start'],
  ];
  if (start && state.root) return { name: `PostgreSQL ${cluster.version}/${cluster.name}`, ...target, start };
  return (
    `DATABASE_URL points at ${address(target)}, where no PostgreSQL is listening: ` +
    (start ? `start it as root (${start[0]!.join(' ')})` : 'start that server') +
    ', or unset DATABASE_URL to test on an embedded PostgreSQL'
  );
}

/** The host and port of `DATABASE_URL` when it is a loopback server (the only kind we may start). */
export function databaseTarget(url: string | undefined): { host: string; port: number } | string | null {
  if (!url) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'DATABASE_URL is not a URL: set it like postgres://user@127.0.0.1:5432/test, or unset it';
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!['localhost', '127.0.0.1', '::1'].includes(host)) return null;
  return { host: host === 'localhost' ? '127.0.0.1' : host, port: Number(parsed.port || 5432) };
}

function notInstalled(requirement: Requirement, missing: readonly string[], state: MachineState): string {
  const what = `${requirement.package} is not installed (${missing.join(', ')} not found; ${requirement.why})`;
  const command = `apt-get install -y --no-install-recommends ${requirement.package}`;
  if (state.debian) return `${what}: install it as root with \`sudo ${command}\``;
  return `${what}: this is not Debian, so npm test cannot install it; install ${requirement.package} with the system's package manager (on Debian: \`${command}\`)`;
}

function notOnPath(requirement: Requirement, offPath: readonly string[], state: MachineState): string {
  const folders = [...new Set(offPath.map((executable) => state.offPath.get(executable)!))].join(':');
  return `${requirement.package} is installed in ${folders}, which is not on PATH (${requirement.why}): add it with \`export PATH="$PATH:${folders}"\``;
}

function notRunning(service: Service, why: string): string {
  const commands = service.start.map((command) => command.join(' ')).join(' && ');
  return `${service.name} is not listening on ${address(service)} (${why}): start it as root with \`sudo sh -c '${commands}'\``;
}
