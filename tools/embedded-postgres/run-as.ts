import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { tmpdir } from 'node:os';

/** The OS user that runs the PostgreSQL binaries. */
export interface RunAs {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  /** True when we are root: PostgreSQL refuses to run as root, so every binary runs as `postgres`. */
  readonly switched: boolean;
}

export function resolveRunAs(): RunAs {
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
export function childOptions(runAs: RunAs | null): SpawnOptions {
  // Work in the temp folder: the caller's may be unreachable for `postgres` (e.g. a mode-700 checkout).
  const options: SpawnOptions = { cwd: tmpdir(), env: childEnv(process.env) };
  return runAs?.switched ? { ...options, uid: runAs.uid, gid: runAs.gid } : options;
}

/** The caller's environment less its PG* variables (PGDATA, PGPORT, ...): they must not reach our server. */
export function childEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('PG')));
}

export interface RunResult {
  readonly ok: boolean;
  /** stdout and stderr together. */
  readonly output: string;
}

export function run(file: string, args: readonly string[], runAs: RunAs | null): Promise<RunResult> {
  return new Promise((done) => {
    const child = spawn(file, args, { ...childOptions(runAs), stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', (error) => done({ ok: false, output: `${file}: ${error.message}` }));
    child.on('close', (code) => done({ ok: code === 0, output: Buffer.concat(chunks).toString('utf8') }));
  });
}
