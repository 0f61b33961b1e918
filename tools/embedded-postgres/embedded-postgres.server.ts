import { spawnSync, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Binaries } from './binaries';
import { inspectPidFile, OWNER_FILE } from './data-folder';
import type { EmbeddedPostgres, Log, ShutdownMode } from './embedded-postgres.interface';
import { pgCtlStartArgs, pgCtlStopArgs } from './pg-commands';
import { findFreePort, killAndWait, onProcessExit, startWatchdog } from './processes';
import { childOptions, run, type RunAs } from './run-as';
import { fileSize, lastLines, readLogTail, SERVER_LOG, setAsideLargeLog } from './server-log';
import { serverFlags } from './server-settings';

/** One running server; the public face of `startEmbeddedPostgres`. */
export class EmbeddedPostgresServer implements EmbeddedPostgres {
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
    /** Called once the server is down and its folder handled, so that the folder can be used again. */
    private readonly release: () => void,
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
    this.launched = true;
    const result = await run(this.binaries.pgCtl, pgCtlStartArgs(this.dataDir, logFile, flags), this.runAs);
    if (!result.ok) {
      const serverLog = await readLogTail(logFile, logOffset);
      throw startFailure({
        port,
        dataDir: this.dataDir,
        runAs: this.runAs.name,
        pgCtlOutput: result.output,
        logFile,
        serverLog,
      });
    }
    if (!this.throwaway) await writeFile(join(this.dataDir, OWNER_FILE), `${process.pid}\n`);
  }

  /** Stops the server with pg_ctl, falling back to SIGKILL: the goal is that no process is left. */
  private async halt(mode: ShutdownMode): Promise<void> {
    const result = await run(this.binaries.pgCtl, pgCtlStopArgs(this.dataDir, mode), this.runAs);
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
    this.release();
  }

  /** Best effort at process exit, where only synchronous code runs. */
  private stopSynchronously(): void {
    if (this.launched) {
      const mode = this.throwaway ? 'immediate' : 'fast';
      spawnSync(this.binaries.pgCtl, pgCtlStopArgs(this.dataDir, mode, 10), {
        ...childOptions(this.runAs),
        stdio: 'ignore',
      });
    }
    if (this.throwaway) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** A failed server start; `portInUse` tells the caller that another free port may succeed. */
export class StartError extends Error {
  constructor(
    message: string,
    readonly portInUse: boolean,
  ) {
    super(message);
    this.name = 'StartError';
  }
}

/** What a failed `pg_ctl start` says: where, pg_ctl's words, the server's last lines, what to check. */
export function startFailure(failure: {
  port: number;
  dataDir: string;
  /** Who ran the server, e.g. `user "postgres"`. */
  runAs: string;
  pgCtlOutput: string;
  logFile: string;
  /** The server log's lines written by this start. */
  serverLog: string;
}): StartError {
  const portInUse = /Address already in use/i.test(failure.serverLog);
  const hint = portInUse
    ? 'Check: the port is already in use by another process.'
    : `Check: the data folder is readable and writable by ${failure.runAs} with mode 700, there is ` +
      'free disk space and shared memory (/dev/shm), and options.settings holds valid settings.';
  const message = [
    `embedded PostgreSQL failed to start on 127.0.0.1:${failure.port} ` +
      `(data ${failure.dataDir}, running as ${failure.runAs}).`,
    `pg_ctl: ${lastLines(failure.pgCtlOutput, 10)}`,
    `server log (${failure.logFile}), last lines:`,
    failure.serverLog,
    hint,
  ];
  return new StartError(message.join('\n'), portInUse);
}
