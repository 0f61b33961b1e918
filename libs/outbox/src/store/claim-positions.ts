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
  /**
   * Where the next safety-net scan starts: the position as it stood when the last one was answered (0 until then).
   * An event the position passed since is at or above it.
   */
  netFrom: bigint;
  /** The position when a safety-net scan in flight was sent (the lowest, if several): the next net's start. */
  netSentFrom: bigint | null;
  /** The highest `seq` proven: every transaction that could hold one at or below it has ended (null: none). */
  proven: bigint | null;
  /** When the claim whose snapshot proved `proven` was answered: a claim sent before saw an older snapshot. */
  provenAt: number;
  marks: Mark[];
  /** When the last safety-net scan (from `netFrom` or below) was sent. */
  fullScanAt: number;
  /** When the last scan from the start was sent. */
  startScanAt: number;
  /**
   * The database's time (ISO 8601) at the last claim that looked at every expired event lease of the tenant since
   * its bound: the next claim's recovery of fanned-out events looks at the leases expired since (null: at all).
   */
  leasesSince: string | null;
  /** The same at the last such claim that was the tenant's safety net (the next net's bound). */
  netLeasesSince: string | null;
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
 * by the safety nets, in two tiers: every `fullScanMs` a scan from where the position stood at the previous one
 * (an event the position passed since, committed by then), and every `startScanMs` a scan from the start (`from`
 * 0: any other). Under a held snapshot the first walks the dead index entries of one period, the second all of
 * them. One instance per relay store; lost on restart (the first claim of each tenant scans from the start).
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
  private leases: {
    since: string | null;
    sentAt: number;
    /** When the last complete scan that looked from `netSince` or earlier was sent (once per `fullScanMs`). */
    allAt: number;
    /** The `since` of the next such scan: the database's `now()` at the last one. */
    netSince: string | null;
    /** When the last complete scan that looked at every expired lease was sent (once per `startScanMs`). */
    startAt: number;
  } = { since: null, sentAt: -Infinity, allAt: -Infinity, netSince: null, startAt: -Infinity };

  constructor(
    private readonly fullScanMs: number,
    private readonly settleMs: number,
    private readonly startScanMs: number = fullScanMs,
  ) {}

  /** Where the next claim of `tenantId` scans from (decimal text; '0': a full scan). */
  from(tenantId: string, now: number): string {
    if (now - this.sweptAt >= this.fullScanMs) {
      this.sweptAt = now;
      for (const [id, kept] of this.tenants)
        if (now - kept.fullScanAt >= 2 * this.fullScanMs) this.tenants.delete(id);
    }
    const state = this.tenants.get(tenantId);
    const start = this.startOf(state, now);
    if (state && start < state.from)
      state.netSentFrom =
        state.netSentFrom === null || state.from < state.netSentFrom ? state.from : state.netSentFrom;
    return start.toString();
  }

  /**
   * Since when the next claim of `tenantId` looks for expired event leases of fanned-out events (database time, ISO
   * 8601; null: every one), by the same tiers as its scan (`from`): since the tenant's last complete look, since
   * its last net's when its net is due, all of them when its scan from the start is due. The lease table's index
   * keeps an entry for every lease deleted since a held snapshot began: below the bound, they are not walked.
   */
  leasesSince(tenantId: string, now: number): string | null {
    const state = this.tenants.get(tenantId);
    const tier = this.tierOf(state, now);
    return tier === 'start' ? null : tier === 'net' ? state!.netLeasesSince : state!.leasesSince;
  }

  /** Where a tenant's claims scan from now: its position, the safety net's start, or 0. */
  private startOf(state: TenantPosition | undefined, now: number): bigint {
    const tier = this.tierOf(state, now);
    return tier === 'start' ? 0n : tier === 'net' ? state!.netFrom : state!.from;
  }

  /** Which of a tenant's safety nets is due: the scan from the start, the period's net, or neither. */
  private tierOf(state: TenantPosition | undefined, now: number): 'start' | 'net' | 'position' {
    if (!state || now - state.startScanAt >= this.startScanMs) return 'start';
    return now - state.fullScanAt >= this.fullScanMs ? 'net' : 'position';
  }

  /**
   * The positions the due-tenant scan starts from (`outbox_due_tenants`' six-argument form): where each tenant's
   * next claim would scan from (its safety net's start when one is due, so the nets hold for the scan too; none
   * for a tenant whose scan from the start is due: the function looks for it from its start), with the server
   * they were read on; and since when their expired event leases are looked for: since the last complete scan,
   * once per `fullScanMs` since the last such scan of a period before, and all of them once per `startScanMs` (a
   * tenant listed by a scan whose visit failed is found then).
   */
  pastSettled(now: number): DuePositions {
    const tenants: string[] = [];
    const seqs: string[] = [];
    for (const [tenantId, state] of this.tenants) {
      const from = this.startOf(state, now);
      if (from > 0n) {
        tenants.push(tenantId);
        seqs.push(from.toString());
      }
      // a look below the position may be the net (`credit`): the next one starts where the position stands now
      if (from < state.from && (state.netSentFrom === null || state.from < state.netSentFrom))
        state.netSentFrom = state.from;
    }
    const { leases } = this;
    const leasesSince =
      now - leases.startAt >= this.startScanMs
        ? null
        : now - leases.allAt >= this.fullScanMs
          ? leases.netSince
          : leases.since;
    return { tenants, seqs, server: this.server ?? '', leasesSince };
  }

  /**
   * Takes in a due-tenant scan sent at `sentAt` with `positions`, run at the database's `now()` `at`: when it
   * listed every due tenant (`complete`), the next looks at the leases that expired since.
   */
  scanned(
    positions: DuePositions,
    at: string,
    complete: boolean,
    sentAt: number,
    listed: ReadonlySet<string> | null = null,
  ): void {
    const { leases } = this;
    if (!complete || sentAt < leases.sentAt) return;
    if (listed) this.credit(positions, listed, sentAt);
    // the period's net (or a look at every lease): the next net looks since this one ran
    const net =
      positions.leasesSince === null ||
      (sentAt - leases.allAt >= this.fullScanMs && positions.leasesSince === leases.netSince);
    if (net) {
      leases.allAt = sentAt;
      leases.netSince = at;
    }
    if (positions.leasesSince === null) leases.startAt = sentAt;
    leases.since = at;
    leases.sentAt = sentAt;
  }

  /**
   * A complete scan from the start of the tenants' ids (`listed`: the tenants it listed) that looked for a tenant
   * from its net's start or below and did not list it found no pending event there: what the net's claim would
   * have found. It counts as that tenant's net (from 0: its scan from the start too), so that a tenant gone idle,
   * never claimed again, is not looked for below its position by every scan.
   */
  private credit(positions: DuePositions, listed: ReadonlySet<string>, sentAt: number): void {
    if (positions.server !== this.server) return;
    const looked = new Map<string, bigint>();
    positions.tenants.forEach((id, i) => looked.set(id, BigInt(positions.seqs[i]!)));
    for (const [id, state] of this.tenants) {
      // not among the positions: looked for from its start (a tenant added since the scan was sent too)
      const from = looked.get(id) ?? 0n;
      if (listed.has(id) || from > state.netFrom) continue;
      state.fullScanAt = Math.max(state.fullScanAt, sentAt);
      if (from === 0n) state.startScanAt = Math.max(state.startScanAt, sentAt);
      const sentFrom = state.netSentFrom ?? from;
      state.netFrom = sentFrom < state.from ? sentFrom : state.from;
      state.netSentFrom = null;
    }
  }

  /** How many tenants it keeps a position for (claimed, or credited a net by a scan, within two full-scan periods). */
  get size(): number {
    return this.tenants.size;
  }

  /**
   * Takes in what a claim that scanned from `scannedFrom` and looked for expired event leases since `leasesFrom`
   * (`leasesSince`), sent at `sentAt`, read when answered at `doneAt`.
   */
  record(
    tenantId: string,
    scannedFrom: string,
    reading: PositionReading,
    sentAt: number,
    doneAt: number,
    leasesFrom: string | null = null,
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
      state = {
        from: 0n,
        netFrom: 0n,
        netSentFrom: null,
        proven: null,
        provenAt: 0,
        marks: [],
        fullScanAt: sentAt,
        startScanAt: sentAt,
        leasesSince: null,
        netLeasesSince: null,
      };
      this.tenants.set(tenantId, state);
    }
    this.recovered(state, reading, leasesFrom, this.tierOf(state, sentAt) === 'net');
    // a scan from the net's start or below saw what the net would: it is the net (from 0: the scan from the start)
    const net = BigInt(scannedFrom) <= state.netFrom;
    if (net) state.fullScanAt = Math.max(state.fullScanAt, sentAt);
    if (full) state.startScanAt = Math.max(state.startScanAt, sentAt);
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
      // (an index loop: no iterator per claim, up to 64 marks)
      let kept = 0;
      for (let i = 0; i < marks.length; i++) {
        const m = marks[i]!;
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
    // a net that finds a pending event below the position takes the position back to it
    if (net && first !== null && first < state.from) state.from = first;
    else if (candidate !== null && candidate > state.from) state.from = candidate;
    // the next net starts where the position stood when this one was sent: what it passed since is above that
    if (net) {
      const sentFrom = state.netSentFrom ?? BigInt(scannedFrom);
      state.netFrom = sentFrom < state.from ? sentFrom : state.from;
      state.netSentFrom = null;
    }
  }

  /**
   * A claim that looked at every expired event lease since its bound (`leasesFrom`) moves the tenant's bound to its
   * time; one sent as the tenant's net (`net`), or with no bound, moves the net's too, so that the next net looks
   * again at what the looks between missed (an event another transaction had locked: the recovery skips it). ISO
   * 8601 in UTC compares as text.
   */
  private recovered(
    state: TenantPosition,
    reading: PositionReading,
    leasesFrom: string | null,
    net: boolean,
  ): void {
    const at = reading.now;
    if (!reading.recovered || at === undefined) return;
    const covers = (bound: string | null): boolean =>
      leasesFrom === null || (bound !== null && leasesFrom <= bound);
    if (covers(state.leasesSince) && (state.leasesSince === null || at > state.leasesSince))
      state.leasesSince = at;
    if ((leasesFrom === null || net) && covers(state.netLeasesSince))
      if (state.netLeasesSince === null || at > state.netLeasesSince) state.netLeasesSince = at;
  }
}
