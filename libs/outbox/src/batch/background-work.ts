import { Logger } from '@nestjs/common';
import { errorText } from '../errors/error-text';
import { RELAY_LOG_CONTEXT } from './tenant-batch';

/** Work the relay does not wait for in the round (commits, releases, vacuums); `stop()` waits for it. */
export class BackgroundWork {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  private readonly pending = new Set<Promise<void>>();

  /** Runs `work` without holding the round up: never rejects (logs), and `settle()` waits for it. */
  track(work: Promise<unknown>): Promise<void> {
    // one promise per work, not three (`then`, `catch`, `finally`): a batch tracks its commit and its release
    const tracked: Promise<void> = work.then(
      () => {
        this.pending.delete(tracked);
      },
      (error: unknown) => {
        this.pending.delete(tracked);
        this.logger.error(`relay background work failed: ${errorText(error)}`);
      },
    );
    this.pending.add(tracked);
    return tracked;
  }

  /** Waits until no background work is left (work may start more of it: a commit, then a vacuum). */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }
}
