import type { PositionReading } from '../model/claimed-delivery';
import type { DuePositions } from './sql/due-tenants';

export type { PositionReading } from '../model/claimed-delivery';

/** A claim's highest pending `seq` seen (null: none), its snapshot's `xmax`, when it was sent and answered (ms). */
interface Mark {
  last: bigint | null;
  xmax: bigint;
  sentAt: number;
  doneAt: number;
}

interface TenantPosition {
  from: bigint;
  /** The highest `seq` proven: every transaction that could hold one at or below it has ended (null: none). */
  proven: bigint | null;
  /** When the claim whose snapshot proved `proven` was answered: a claim sent before saw an older snapshot. */
  provenAt: number;
  marks: Mark[];
  fullScanAt: number;
}

/** Marks kept per tenant while none is safe yet (dropping the oldest only makes the position advance less far). */
const MAX_MARKS = 64;

/**
 * Per tenant, the `seq` from which this relay's claims of new events scan the pending events
 * (docs/adr/1206-claims-that-start-past-the-settled.md): every event below it is settled, or being settled
 * through a claim that saw it, and no transaction still open can commit a pending event below it. A claim's
 * index scan then starts there, past the index entries of settled events that a held snapshot keeps vacuum from
 * removing.
 *
 * The position never passes a pending event the claim saw (`first`, leased ones included), nor the highest
 * pending `seq` of an earlier claim (`last`) until that claim is *safe*: a later claim `d`, sent at least
 * `settleMs` after the earlier one's answer, has a snapshot `xmax` at or below the current snapshot's `xmin` —
 * every transaction that had an id when `d` started has ended. `seq` values are given at insert, before the
 * row's transaction may have an id; one waiting that long between the two (a lock wait in its insert) is caught
 * by a full scan (`from` 0), run for each tenant every `fullScanMs`. One instance per relay store; lost on restart
 * (the first claim of each tenant is a full scan).
 */
export class ClaimPositions {
  private readonly tenants = new Map<string, TenantPosition>();
  /** The server the positions were read on (its postmaster's start), null before the first reading. */
  private server: string | null = null;
  /** When tenants without a claim for two periods were last dropped (their next claim is a full scan anyway). */
  private sweptAt = 0;
  /**
   * The due-tenant scan's event leases: the database's `now()` at the last complete scan (`since`), and when the
   * last complete scan that looked at every expired lease was sent (once per `fullScanMs`).
   */
  private leases: { since: string | null; sentAt: number; allAt: number } = {
    since: null,
    sentAt: -Infinity,
    allAt: -Infinity,
  };

  constructor(
    private readonly fullScanMs: number,
    private readonly settleMs: number,
  ) {}

  /** Where the next claim of `tenantId` scans from (decimal text; '0': a full scan). */
  from(tenantId: string, now: number): string {
    if (now - this.sweptAt >= this.fullScanMs) {
      this.sweptAt = now;
      for (const [id, kept] of this.tenants)
        if (now - kept.fullScanAt >= 2 * this.fullScanMs) this.tenants.delete(id);
    }
    const state = this.tenants.get(tenantId);
    if (!state || now - state.fullScanAt >= this.fullScanMs) return '0';
    return state.from.toString();
  }

  /**
   * The positions the due-tenant scan starts from (`outbox_due_tenants`' six-argument form): each tenant's whose
   * next claim would scan from it, not those whose full scan is due (the scan looks for those from their start,
   * so the full scan's safety net holds for the scan too), with the server they were read on; and since when
   * their expired event leases are looked for: since the last complete scan, or all of them once per
   * `fullScanMs` (a tenant listed by a scan whose visit failed is found then).
   */
  pastSettled(now: number): DuePositions {
    const tenants: string[] = [];
    const seqs: string[] = [];
    for (const [tenantId, state] of this.tenants)
      if (state.from > 0n && now - state.fullScanAt < this.fullScanMs) {
        tenants.push(tenantId);
        seqs.push(state.from.toString());
      }
    const leasesSince = now - this.leases.allAt < this.fullScanMs ? this.leases.since : null;
    return { tenants, seqs, server: this.server ?? '', leasesSince };
  }

  /**
   * Takes in a due-tenant scan sent at `sentAt` with `positions`, run at the database's `now()` `at`: when it
   * listed every due tenant (`complete`), the next looks at the leases that expired since.
   */
  scanned(positions: DuePositions, at: string, complete: boolean, sentAt: number): void {
    if (!complete || sentAt < this.leases.sentAt) return;
    this.leases.since = at;
    this.leases.sentAt = sentAt;
    if (positions.leasesSince === null) this.leases.allAt = sentAt;
  }

  /** How many tenants it keeps a position for (those claimed within the last two full-scan periods or so). */
  get size(): number {
    return this.tenants.size;
  }

  /** Takes in what a claim that scanned from `scannedFrom`, sent at `sentAt`, read when answered at `doneAt`. */
  record(
    tenantId: string,
    scannedFrom: string,
    reading: PositionReading,
    sentAt: number,
    doneAt: number,
  ): void {
    // Another server (a standby promoted, a restart, a restore): its sequence may give again seqs below the
    // positions, and settlements the old one made may be lost. Every tenant starts over with a full scan.
    if (this.server !== reading.server) {
      if (this.server !== null) this.tenants.clear();
      this.server = reading.server;
      if (scannedFrom !== '0') return;
    }
    const full = scannedFrom === '0';
    let state = this.tenants.get(tenantId);
    if (!state) {
      if (!full) return;
      state = { from: 0n, proven: null, provenAt: 0, marks: [], fullScanAt: sentAt };
      this.tenants.set(tenantId, state);
    }
    if (full) state.fullScanAt = Math.max(state.fullScanAt, sentAt);
    const last = reading.last === null ? null : BigInt(reading.last);
    // in order of sending: placed from the end (mostly where it is pushed), no sort of the kept marks per claim
    const { marks } = state;
    let at = marks.push({ last, xmax: BigInt(reading.xmax), sentAt, doneAt }) - 1;
    for (; at > 0 && marks[at - 1]!.sentAt > sentAt; at--)
      [marks[at - 1], marks[at]] = [marks[at]!, marks[at - 1]!];
    if (marks.length > MAX_MARKS) marks.shift();
    // A claim answered out of order (two lanes on the tenant, a lease insert that waited) may have read an older
    // snapshot than the claim that proved the position, or scanned from above where a full scan took it back
    // since: what it did not see may be pending below. It may prove, but not move the position.
    const stale = sentAt < state.provenAt || (!full && BigInt(scannedFrom) > state.from);
    const xmin = BigInt(reading.xmin);
    // the latest claim whose snapshot's transactions have all ended (this one's too, when none was running)
    let closed: Mark | undefined;
    for (let i = marks.length - 1; i >= 0 && !closed; i--) if (marks[i]!.xmax <= xmin) closed = marks[i];
    if (closed) {
      // the safe marks give what they prove and go (in place); the closed one stays, a later claim's earlier mark
      let kept = 0;
      for (const m of marks) {
        if (m.doneAt + this.settleMs > closed.sentAt) marks[kept++] = m;
        else if (m.last !== null && (state.proven === null || m.last > state.proven)) {
          state.proven = m.last;
          state.provenAt = Math.max(state.provenAt, doneAt);
        }
      }
      marks.length = kept;
    }
    const first = reading.first === null ? null : BigInt(reading.first);
    const proven = state.proven;
    // nothing proven: no open transaction is known not to hold a lower seq, the position stays
    const candidate =
      proven === null || stale ? null : first !== null && first <= proven ? first : proven + 1n;
    // a full scan that finds a pending event below the position takes the position back to it
    if (full && first !== null && first < state.from) state.from = first;
    else if (candidate !== null && candidate > state.from) state.from = candidate;
  }
}
