import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import type { Log } from './embedded-postgres.interface';

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

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // exists, but belongs to another user
  }
  // A killed process stays a zombie until its parent reaps it (some container inits reap late): dead to us.
  const status = readProcStat(pid);
  return status === null || !isZombie(status);
}

/** Whether a `/proc/<pid>/stat` line says the process is a zombie (state `Z`, after its command). */
export function isZombie(procStat: string): boolean {
  return /^\d+ \(.*\) Z/s.test(procStat);
}

function readProcStat(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // no /proc (macOS), or it just went away
  }
}

export async function killAndWait(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return; // already gone
  }
  for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
}

/** Starts the watchdog shell described at {@link WATCHDOG_SCRIPT}; it must not keep this process alive. */
export function startWatchdog(dataDir: string, log: Log): ChildProcess {
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
export function onProcessExit(cleanup: () => void): () => void {
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

export function findFreePort(): Promise<number> {
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
