import { NIL_UUID } from '../model/outbox.constants';

/**
 * What `claimFloorReading` returns: the floor and the open floor (null: today's layout), the snapshot's `xmin` and
 * `xmax`, the server.
 */
export interface FloorReading {
  floor: string | null;
  open: string | null;
  xmin: string;
  xmax: string;
  server: string;
}

/**
 * The lowest event id this relay's claims look at in the partitioned layout (docs/adr/1207-partitioned-history.md,
 * "Amended 2026-12-06"), passed to them as a parameter so that PostgreSQL prunes the older ranges when the executor
 * starts. A reading (`outbox_claim_floor`) gives the start of the oldest range holding unsettled work, at most
 * `marginMs` before now. Ids are made by the app, by its clock, and a transaction may commit long after it made
 * one: an event may appear below a floor already read. Hence:
 *
 * - a reading lowers the bound at once (lower is always safe), but raises it only once a later reading's snapshot
 *   `xmin` is at or above its `xmax` — every transaction that had an id when it was read has ended, so what they
 *   inserted is seen by the later reading, which bounds the raise too;
 * - the margin covers a transaction that made its id before the reading and wrote after it (a host's clock behind,
 *   a slow transaction), and ids made by another host's clock up to `marginMs` behind;
 * - each tenant's claims run without the bound once every `fullScanMs` (its first claim too): what
 *   the rules above miss (a transaction that waited longer than the margin between its id and its insert, work
 *   brought back in an old range between two readings: a replay, a backfill) is claimed within that period.
 *
 * The due-tenant scan is bounded by the same floor (`ofScan`), or a tenant whose only work lies below it would never
 * be visited, so never claimed without it. Its safety net mirrors the claims': once every `fullScanMs` (the first
 * scan too) a sweep of scans without the bound, from the scan's cursor round the tenants' ids to where it began
 * (`scanned`); a tenant's next claim after a sweep begins goes without the bound too, so work below the floor that a
 * sweep lists is claimed at that visit (docs/adr/1207-partitioned-history.md, addendum "The due-tenant scan stops at
 * the floor").
 *
 * A reading probes the ranges from the open floor of the one before (the oldest range older than the margin holding
 * open work, claimable now or later), lowered to what was reopened since that one's snapshot (`xmin`): a replay, a
 * backfill write where (`outbox_reopened`), so they are found at the next reading as before, while settled ranges
 * are not probed again. Every `fullScanMs` (the first reading too, and after a failed one) a reading probes every
 * range (docs/adr/1207-partitioned-history.md, addendum "A floor reading from the open floor").
 *
 * No bound before two readings, on today's layout, or after a reading failed; another server (its postmaster's
 * start) starts over. One instance per relay store.
 */
export class ClaimFloor {
  private bound: string | null = null;
  /** The latest reading that may raise the bound, once proven. */
  private proving: { floor: string; xmax: bigint } | null = null;
  private server: string | null = null;
  private readAt = -Infinity;
  private readonly fullScans = new Map<string, number>();
  private sweptAt = 0;
  /** The last reading's open floor and snapshot `xmin`, where the next one starts (null: every range). */
  private open: { from: string; since: string } | null = null;
  /** When the last reading of every range was sent. */
  private allReadAt = -Infinity;
  /** How many readings were sent, and which of them gave `open`: a reading that returns late does not replace it. */
  private sent = 0;
  private openSent = 0;
  /** When the due-tenant scans' last sweep without the bound began. */
  private scanSweepAt = -Infinity;
  /** The sweep in progress: the cursor it began at, and the cursor its next scan is expected from. */
  private sweep: { from: string; next: string } | null = null;

  constructor(
    readonly marginMs: number,
    private readonly refreshMs: number,
    private readonly fullScanMs: number,
  ) {}

  /** Whether the claims have a bound (two readings agreed). */
  get bounded(): boolean {
    return this.bound !== null;
  }

  /** Whether a reading is due (none for `refreshMs`); the caller reads and `record`s it, or calls `failed`. */
  due(now: number): boolean {
    if (now - this.readAt < this.refreshMs) return false;
    this.readAt = now;
    return true;
  }

  /**
   * Where the reading sent now starts: the last reading's open floor and `xmin`, or nulls (every range) when there
   * is none or no reading of every range was sent for `fullScanMs`.
   */
  from(now: number): { openFrom: string | null; since: string | null; sent: number } {
    const open = this.open;
    const sent = ++this.sent;
    if (open === null || now - this.allReadAt >= this.fullScanMs) {
      this.allReadAt = now;
      return { openFrom: null, since: null, sent };
    }
    return { openFrom: open.from, since: open.since, sent };
  }

  /** The floor of the next claim of `tenantId` (the nil id: no bound). */
  of(tenantId: string, now: number): string {
    if (now - this.sweptAt >= this.fullScanMs) {
      this.sweptAt = now;
      for (const [id, at] of this.fullScans) if (now - at >= 2 * this.fullScanMs) this.fullScans.delete(id);
    }
    const at = this.fullScans.get(tenantId);
    if (at === undefined || now - at >= this.fullScanMs || at < this.scanSweepAt) {
      this.fullScans.set(tenantId, now);
      return NIL_UUID;
    }
    return this.bound ?? NIL_UUID;
  }

  /**
   * The floor of a due-tenant scan from the cursor `after` (null: from the first tenant): the nil id while a sweep
   * runs, and when one is due (none began for `fullScanMs`), which it begins.
   */
  ofScan(after: string | null, now: number): string {
    const cursor = after ?? MAX_UUID;
    // a scan from elsewhere than where the sweep got to (a failed round, the cursor reset): it starts over there
    if (this.sweep !== null && this.sweep.next !== cursor) this.sweep = { from: cursor, next: cursor };
    if (this.sweep === null && now - this.scanSweepAt >= this.fullScanMs) {
      this.scanSweepAt = now;
      this.sweep = { from: cursor, next: cursor };
    }
    return this.sweep !== null ? NIL_UUID : (this.bound ?? NIL_UUID);
  }

  /**
   * Takes in a due-tenant scan from `after` that listed `listed` (in its order) of at most `limit`: a sweep ends
   * with a scan that listed every due tenant, or once its scans went round the tenants' ids past where it began.
   */
  scanned(after: string | null, listed: readonly string[], limit: number): void {
    const sweep = this.sweep;
    if (sweep === null || sweep.next !== (after ?? MAX_UUID)) return;
    const last = listed[listed.length - 1];
    if (last === undefined || listed.length < limit || passes(after, last, sweep.from)) this.sweep = null;
    else sweep.next = last;
  }

  /** Takes in a reading, the `sent`th (`from`; default: the last sent). */
  record(reading: FloorReading, sent = this.sent): void {
    if (reading.floor === null || (this.server !== null && this.server !== reading.server)) {
      this.bound = null;
      this.proving = null;
    }
    this.server = reading.server;
    // the pair of one reading: what it found open, and the transactions it did not see (from its xmin); not that of
    // a reading sent before the one that gave the current pair (a reading of every range sees more)
    if (sent >= this.openSent) {
      this.open = reading.open === null ? null : { from: reading.open, since: reading.xmin };
      this.openSent = sent;
    }
    const floor = reading.floor;
    if (floor === null) return;
    if (this.bound !== null && floor < this.bound) this.bound = floor;
    const proving = this.proving;
    if (proving !== null && BigInt(reading.xmin) < proving.xmax) return;
    if (proving !== null) this.bound = floor < proving.floor ? floor : proving.floor;
    this.proving = { floor, xmax: BigInt(reading.xmax) };
  }

  /** A reading failed: no bound until two readings succeed. */
  failed(): void {
    this.bound = null;
    this.proving = null;
    this.open = null;
  }
}

/** The highest uuid: a sweep that began from the first tenant (no cursor) ends once its scans wrapped round. */
const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/**
 * Whether a scan from `after` whose last listed tenant is `last` listed past `from`: the scan lists the tenants
 * above its cursor, then from the first (`order by tenant_id <= after, tenant_id`), so in that order `from` comes at
 * or before `last`.
 */
function passes(after: string | null, last: string, from: string): boolean {
  const wrapped = (id: string): boolean => after !== null && id <= after;
  if (wrapped(from) !== wrapped(last)) return wrapped(last);
  return from <= last;
}
