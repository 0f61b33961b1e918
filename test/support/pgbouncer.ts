import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { waitFor } from './wait-for';

/** A PgBouncer (Debian's `pgbouncer` package) in front of the test PostgreSQL, on a free port. */
export interface PgBouncer {
  /** `url` with its host and port replaced by PgBouncer's. */
  through(url: string): string;
  stop(): Promise<void>;
}

/** Where Debian installs it (`apt-get install pgbouncer`; `npm test` does when it is missing: tools/test-set-up). */
const PGBOUNCER = '/usr/sbin/pgbouncer';

/**
 * Starts PgBouncer in `mode` in front of the server of `serverUrl`, with a config file written for it: every
 * database, any user (trust, as the test server), connected to the server as that URL's user.
 */
export async function startPgBouncer(mode: 'session' | 'transaction', serverUrl: string): Promise<PgBouncer> {
  const server = new URL(serverUrl);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'outbox-pgbouncer-'));
  // PgBouncer refuses to run as root: it then runs as `postgres`, which must read its folder
  chmodSync(dir, 0o777);
  const ini = join(dir, 'pgbouncer.ini');
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432} user=${decodeURIComponent(server.username || 'postgres')}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      `pool_mode = ${mode}`,
      'max_client_conn = 200',
      'default_pool_size = 20',
      'ignore_startup_parameters = extra_float_digits,options',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  chmodSync(ini, 0o644);
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'postgres'] : []), ini], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const through = (url: string): string => {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(port);
    return parsed.toString();
  };
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${stderr}${log(dir)}`);
        const client = new Client({ connectionString: through(serverUrl) });
        try {
          await client.connect();
          await client.query('select 1');
          return true;
        } catch {
          return false;
        } finally {
          await client.end().catch(() => undefined);
        }
      },
      { timeoutMs: 10_000, intervalMs: 50, message: 'pgbouncer accepting connections' },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { through, stop };
}

function log(dir: string): string {
  try {
    return readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
  } catch {
    return '';
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
