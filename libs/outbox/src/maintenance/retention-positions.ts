import type { Clock } from '../model/clock';
import type { PurgePositions } from '../store/sql/retention';

/** How often a retention run starts from each table's oldest settled event rather than from its position. */
export const FULL_SCAN_EVERY_MS = 3_600_000;

const START: PurgePositions = { ranges: [], ats: [] };

/**
 * Where retention's next batch starts, per instance (ADR 1206, addendum "Retention's purge"). Batches continue
 * from the `published_at` the last one ended at, across runs: while a snapshot is held, the index entries of the
 * events deleted since it began stay, and a batch that starts from the oldest reads them all again. A position
 * misses an event settled below it after it passed (a transaction that committed late, a row another transaction
 * had locked): the first run of an instance, and a run at least {@link FULL_SCAN_EVERY_MS} after the last such
 * one, start from the oldest instead, so such an event waits an hour more at most. Another instance's batches
 * leave these behind, never ahead: they then read more, never skip.
 */
export class RetentionPositions {
  private positions: PurgePositions = START;
  private fullScanAt: number | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly fullScanEveryMs = FULL_SCAN_EVERY_MS,
  ) {}

  /** At the start of a run: forgets the positions when a full scan is due. */
  startRun(): void {
    const now = this.clock.now();
    if (this.fullScanAt !== null && now - this.fullScanAt < this.fullScanEveryMs) return;
    this.fullScanAt = now;
    this.positions = START;
  }

  /** Where the next batch starts. */
  get current(): PurgePositions {
    return this.positions;
  }

  /** After a batch: the positions the database moved to. */
  moveTo(positions: PurgePositions): void {
    this.positions = positions;
  }
}
