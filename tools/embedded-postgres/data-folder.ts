import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { cacheRoot, ensureSharedDir, type Binaries } from './binaries';
import type { Log } from './embedded-postgres.interface';
import { initdbArgs, pgCtlStopArgs } from './pg-commands';
import { isAlive, killAndWait } from './processes';
import { run, type RunAs } from './run-as';
import { lastLines } from './server-log';

/** Which process runs a persistent cluster: tells a live owner from a server orphaned by a crash. */
export const OWNER_FILE = 'embedded-postgres.owner';

/** Returns the absolute data folder to use, created and owned by `runAs`. */
export async function prepareDataDir(
  requested: string | undefined,
  persistent: boolean,
  runAs: RunAs,
  log: Log,
): Promise<string> {
  let dir: string;
  if (requested === undefined && !persistent) {
    dir = await mkdtemp(join(tmpdir(), 'outbox-pg-'));
  } else {
    const wanted = resolve(requested ?? join(await sharedDataRoot(), 'default'));
    await mkdir(dirname(wanted), { recursive: true });
    dir = wanted;
    if (runAs.switched && !(await run('test', ['-x', dirname(wanted)], runAs)).ok) {
      // `postgres` cannot traverse the requested folder's parents (e.g. inside a mode-700 checkout).
      dir = persistent
        ? join(await sharedDataRoot(), relocatedClusterName(wanted))
        : await mkdtemp(join(tmpdir(), 'outbox-pg-'));
      log(`${runAs.name} cannot reach ${wanted}; keeping the cluster in ${dir} instead`);
    }
    if (!persistent && existsSync(dir) && (await readdir(dir)).length > 0) {
      throw new Error(`embedded PostgreSQL: ${dir} is not empty, but a throwaway cluster is deleted on stop`);
    }
    await mkdir(dir, { recursive: true, mode: 0o700 });
  }
  if (runAs.switched && (await stat(dir)).uid !== runAs.uid) {
    const result = await run('chown', ['-R', `${runAs.uid}:${runAs.gid}`, dir], null);
    if (!result.ok) {
      throw new Error(`embedded PostgreSQL: cannot give ${dir} to ${runAs.name}: ${result.output}`);
    }
  }
  return dir;
}

/**
 * The folder name, under the shared data root, of a persistent cluster whose requested folder `postgres`
 * cannot reach: the same on every run from the same requested folder, different for different ones.
 */
export function relocatedClusterName(wanted: string): string {
  return `${basename(wanted)}-${createHash('sha256').update(wanted).digest('hex').slice(0, 12)}`;
}

/** Parent of persistent clusters relocated from (or defaulting to) the OS temp folder. */
async function sharedDataRoot(): Promise<string> {
  return ensureSharedDir(join(await ensureSharedDir(cacheRoot()), 'data'));
}

export async function initCluster(
  binaries: Binaries,
  runAs: RunAs,
  dataDir: string,
  throwaway: boolean,
): Promise<void> {
  const result = await run(binaries.initdb, initdbArgs(dataDir, throwaway), runAs);
  if (!result.ok) {
    throw new Error(
      `embedded PostgreSQL: initdb failed for ${dataDir} (running as ${runAs.name}):\n` +
        `${lastLines(result.output, 30)}\n` +
        `Check: ${dataDir} is empty (holds no half-made cluster) and writable by ${runAs.name}, ` +
        'the binaries run, and there is free disk space.',
    );
  }
}

/** Prepares an existing persistent cluster whose previous run may have crashed. */
export async function takeOverCluster(
  binaries: Binaries,
  runAs: RunAs,
  dataDir: string,
  log: Log,
): Promise<void> {
  const postmaster = await inspectPidFile(dataDir);
  // No pid file, or its process is dead: PostgreSQL itself handles that lock.
  if (postmaster === null || postmaster.state === 'dead') return;
  if (postmaster.state === 'other') {
    // The PID now belongs to an unrelated process (common after a container restart): PostgreSQL would
    // take it for a running server and refuse to start.
    await rm(join(dataDir, 'postmaster.pid'), { force: true });
    log(`removed a stale postmaster.pid (PID ${postmaster.pid} is no longer PostgreSQL)`);
    return;
  }
  const ownerFile = join(dataDir, OWNER_FILE);
  const owner = Number.parseInt(await readFile(ownerFile, 'utf8').catch(() => ''), 10);
  if (Number.isInteger(owner) && owner !== process.pid && isAlive(owner)) {
    throw new Error(
      `embedded PostgreSQL: the cluster in ${dataDir} is already running (postmaster ${postmaster.pid}) ` +
        `for the live process ${owner}. Stop that process first (or delete ${ownerFile} if it is not).`,
    );
  }
  // Its owner is gone (e.g. killed with SIGKILL) but the server kept running: stop it and start ours.
  log(`stopping PostgreSQL (postmaster ${postmaster.pid}) left running by a previous run`);
  const result = await run(binaries.pgCtl, pgCtlStopArgs(dataDir, 'fast'), runAs);
  if (!result.ok) await killAndWait(postmaster.pid);
}

export interface PidFileState {
  readonly pid: number;
  readonly state: 'postmaster' | 'dead' | 'other';
}

/**
 * What the cluster's `postmaster.pid` points at: a live postmaster of this cluster, a dead process, or a
 * live process that is something else (the PID was reused). Null when there is no pid file.
 */
export async function inspectPidFile(dataDir: string): Promise<PidFileState | null> {
  const content = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => null);
  const pid = postmasterPid(content);
  if (pid === null) return null;
  if (!isAlive(pid)) return { pid, state: 'dead' };
  const command = await commandLineOf(pid);
  // Unknown command line (no /proc, no ps): assume it is ours rather than risk two servers on one cluster.
  if (command === null) return { pid, state: 'postmaster' };
  return { pid, state: isPostmasterOf(command, dataDir) ? 'postmaster' : 'other' };
}

/** The PID on the first line of a `postmaster.pid`'s content, or null when there is none. */
export function postmasterPid(content: string | null): number | null {
  const pid = Number.parseInt(content?.split('\n')[0] ?? '', 10);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** Whether a process's command line is a PostgreSQL server of the cluster in `dataDir`. */
export function isPostmasterOf(command: string, dataDir: string): boolean {
  return /postgres/.test(command) && command.includes(dataDir);
}

async function commandLineOf(pid: number): Promise<string | null> {
  const proc = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
  if (proc !== null) return proc.split('\0').join(' ');
  const ps = await run('ps', ['-o', 'command=', '-p', String(pid)], null);
  return ps.ok ? ps.output : null;
}
