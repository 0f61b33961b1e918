/** Looks at the machine for what the test suite needs, and installs and starts it: the side of the set-up. */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { delimiter, isAbsolute, join } from 'node:path';
import {
  address,
  databaseTarget,
  REQUIREMENTS,
  type MachineState,
  type PgCluster,
  type Requirement,
  type Service,
} from './test-requirements';

/** Probes files and ports only; `pg_lsclusters` runs only when `DATABASE_URL` names a loopback server that is down. */
export async function probeMachine(env: NodeJS.ProcessEnv = process.env): Promise<MachineState> {
  const names = REQUIREMENTS.flatMap((r) => r.executables);
  const executables = new Set(names.filter((name) => isExecutable(name, env.PATH)));
  // a non-root user's PATH often lacks the sbin folders, where Debian puts the servers
  const offPath = new Map<string, string>();
  for (const name of names.filter((n) => !executables.has(n) && !isAbsolute(n))) {
    const dir = SBIN.find((candidate) => isExecutable(join(candidate, name), ''));
    if (dir) offPath.set(name, dir);
  }
  const database = databaseTarget(env.DATABASE_URL?.trim());
  const targets = REQUIREMENTS.flatMap((r) => (r.service ? [r.service] : []));
  if (database && typeof database !== 'string') targets.push({ name: 'PostgreSQL', ...database, start: [] });
  const open = await Promise.all(targets.map((target) => accepts(target.host, target.port)));
  const listening = new Set(targets.filter((_, i) => open[i]).map(address));
  const databaseDown = database && typeof database !== 'string' && !listening.has(address(database));
  return {
    debian: existsSync('/etc/debian_version') && isExecutable('apt-get', env.PATH),
    root: process.getuid?.() === 0,
    executables,
    offPath,
    listening,
    databaseUrl: env.DATABASE_URL?.trim() || undefined,
    clusters: databaseDown ? pgClusters() : [],
  };
}

/** `apt-get install`, after an `apt-get update` when the first try fails (a new machine has no package lists). */
export function installPackages(requirements: readonly Requirement[]): void {
  const packages = requirements.map((r) => r.package);
  // wait for another apt run (a parallel install) instead of failing on its lock
  const install = [
    '-o',
    'DPkg::Lock::Timeout=300',
    'install',
    '-y',
    '-q',
    '--no-install-recommends',
    ...packages,
  ];
  if (aptGet(install) === 0) return;
  console.log('test set-up: apt-get install failed; updating the package lists and trying again');
  let status = aptGet(['-o', 'DPkg::Lock::Timeout=300', 'update', '-q']);
  if (status === 0) status = aptGet(install);
  if (status !== 0) {
    throw new Error(
      `apt-get failed (exit ${status}) installing ${packages.join(', ')}: install them as root with ` +
        `\`apt-get update && apt-get install -y --no-install-recommends ${packages.join(' ')}\`, then run npm test again`,
    );
  }
}

/** Runs the service's start commands unless it came up meanwhile, then waits for its port. */
export async function startService(service: Service, timeoutMs = 60_000): Promise<void> {
  if (await accepts(service.host, service.port)) return;
  for (const [file, ...args] of service.start) {
    const { status, error } = spawnSync(file!, args, { stdio: 'inherit' });
    if (status !== 0)
      console.log(`test set-up: \`${file} ${args.join(' ')}\` ${error?.message ?? `exited ${status}`}`);
  }
  const deadline = Date.now() + timeoutMs;
  while (!(await accepts(service.host, service.port))) {
    if (Date.now() > deadline) {
      throw new Error(
        `${service.name} did not come up on ${address(service)} within ${timeoutMs / 1000} s of ` +
          `\`${service.start.map((command) => command.join(' ')).join(' && ')}\`: see its log, start it, and run again`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function aptGet(args: readonly string[]): number {
  const result = spawnSync('apt-get', args, {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.status ?? 1;
}

const SBIN = ['/usr/sbin', '/usr/local/sbin', '/sbin'];

function isExecutable(name: string, path: string | undefined): boolean {
  const candidates = isAbsolute(name) ? [name] : (path ?? '').split(delimiter).map((dir) => join(dir, name));
  return candidates.some((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (open: boolean): void => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.connect(port, host);
  });
}

/** Debian's clusters from `pg_lsclusters --no-header` (version, name, port, status, ...); none without it. */
export function pgClusters(): PgCluster[] {
  const result = spawnSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' });
  return result.status === 0 ? parsePgClusters(result.stdout) : [];
}

export function parsePgClusters(output: string): PgCluster[] {
  return output
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 3 && /^\d+$/.test(fields[2]!))
    .map(([version, name, port]) => ({ version: version!, name: name!, port: Number(port) }));
}
