import { Logger } from '@nestjs/common';
import { errorText } from '../errors/error-text';
import { RELAY_LOG_CONTEXT } from './tenant-batch';

/** Work the relay does not wait for in the round (commits, releases, vacuums); `stop()` waits for it. */
export class BackgroundWork {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  /** Work tracked and not done yet. */
  private running = 0;
  /** While `settle()` waits: resolved when no work is left. */
  private idle: { done: Promise<void>; resolve: () => void } | null = null;

  /** Runs `work` without holding the round up: never rejects (logs), and `settle()` waits for it. */
  track(work: Promise<unknown>): Promise<void> {
    // one promise per work and no callback made for it: a count, not a set of the promises (a batch tracks its
    // commit and its release: two closures each, and a set's table made anew as its deleted entries piled up)
    this.running++;
    return work.then(this.ended, this.failed);
  }

  /** Waits until no background work is left (work may start more of it: a commit, then a vacuum). */
  async settle(): Promise<void> {
    while (this.running > 0) {
      if (this.idle === null) {
        let resolve!: () => void;
        const done = new Promise<void>((r) => (resolve = r));
        this.idle = { done, resolve };
      }
      await this.idle.done;
    }
  }

  /** A tracked work's end: made once, for every work. */
  private readonly ended = (): void => {
    if (--this.running > 0 || this.idle === null) return;
    const { resolve } = this.idle;
    this.idle = null;
    resolve();
  };

  private readonly failed = (error: unknown): void => {
    this.ended();
    this.logger.error(`relay background work failed: ${errorText(error)}`);
  };
}
