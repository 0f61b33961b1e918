/**
 * A fixed CPU load on every core, for the peers scenario's loaded variant: one child process per core, each
 * busy for `busyMs` then idle for `idleMs`, started before a variant's lines and stopped after them, the same
 * for every system. Its CPU is the children's: neither `process.cpuUsage()` of the bench nor the PostgreSQL
 * backends' /proc figures count it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

/** A duty cycle per core: busy, then idle, in milliseconds. */
export interface DutyCycle {
  busyMs: number;
  idleMs: number;
}

const LOAD_WORKER_FILE = join(__dirname, '..', 'workers', 'load-worker.js');

export class BackgroundLoad {
  private constructor(private readonly children: readonly ChildProcess[]) {}

  /** One busy-looping child per core. */
  static start(duty: DutyCycle, cores = availableParallelism()): BackgroundLoad {
    const children = Array.from({ length: cores }, () =>
      fork(LOAD_WORKER_FILE, [String(duty.busyMs), String(duty.idleMs)], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      }),
    );
    return new BackgroundLoad(children);
  }

  /** `2 processes, each 10 ms busy / 10 ms idle (50% of a core)`. */
  static describe(duty: DutyCycle, cores = availableParallelism()): string {
    const share = Math.round((100 * duty.busyMs) / (duty.busyMs + duty.idleMs));
    return `${cores} process(es), one per core, each ${duty.busyMs} ms busy / ${duty.idleMs} ms idle (${share}% of a core)`;
  }

  /** Stops every child and waits until each has exited; safe to call twice. */
  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGKILL');
        await exited;
      }),
    );
  }
}
