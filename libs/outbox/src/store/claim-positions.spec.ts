import { ClaimPositions, type PositionReading } from './claim-positions';

const T = 'tenant';

/** A reading: pending seqs `first`..`last` (null: none), a snapshot `xmin:xmax`. */
const read = (
  first: number | null,
  last: number | null,
  xmin: number,
  xmax: number,
  server = 'primary',
): PositionReading => ({
  first: first === null ? null : String(first),
  last: last === null ? null : String(last),
  xmin: String(xmin),
  xmax: String(xmax),
  server,
});

describe('ClaimPositions', () => {
  it('has a tenant it never saw scan from the start', () => {
    expect(new ClaimPositions(60_000, 0).from(T, 0)).toBe('0');
  });

  it('moves past the highest pending seq of a claim once a later claim, every transaction of its snapshot ended', () => {
    const p = new ClaimPositions(60_000, 0);
    // claim 1 saw pending 10..20; transactions 100..109 were running
    p.record(T, '0', read(10, 20, 100, 110), 0, 1);
    expect(p.from(T, 2)).toBe('0');
    // claim 2: 100..109 still running for all it knows (xmin 105): claim 1 not closed
    p.record(T, '0', read(21, 30, 105, 120), 2, 3);
    expect(p.from(T, 4)).toBe('0');
    // claim 3: every transaction below 120 ended: claim 2 closed, and claim 1, answered before claim 2 was sent, safe
    p.record(T, '0', read(25, 40, 120, 130), 4, 5);
    expect(p.from(T, 6)).toBe('21');
  });

  it('gives the due-tenant scan the positions the claims would scan from, none whose full scan is due', () => {
    const p = new ClaimPositions(60_000, 0);
    expect(p.pastSettled(0)).toEqual({ tenants: [], seqs: [], server: '', leasesSince: null });
    p.record(T, '0', read(10, 20, 100, 110), 0, 1);
    p.record(T, '0', read(12, 30, 110, 120), 2, 3);
    p.record(T, '0', read(12, 40, 120, 130), 4, 5);
    expect(p.pastSettled(6)).toEqual({ tenants: [T], seqs: ['12'], server: 'primary', leasesSince: null });
    // a minute after its last full scan (sent at 4), the tenant's next claim scans from the start: the due-tenant scan too
    expect(p.from(T, 60_003)).toBe('12');
    expect(p.from(T, 60_004)).toBe('0');
    expect(p.pastSettled(60_004)).toEqual({ tenants: [], seqs: [], server: 'primary', leasesSince: null });
  });

  it('has the due-tenant scan look at the leases expired since its last complete scan, at all once per fullScanMs', () => {
    const p = new ClaimPositions(60_000, 0);
    const first = p.pastSettled(0);
    expect(first.leasesSince).toBeNull();
    p.scanned(first, 't0', true, 0);
    const second = p.pastSettled(100);
    expect(second.leasesSince).toBe('t0');
    // a scan that listed as many tenants as a round visits does not move it: some were left for the next round
    p.scanned(second, 't1', false, 100);
    expect(p.pastSettled(200).leasesSince).toBe('t0');
    p.scanned(p.pastSettled(200), 't2', true, 200);
    expect(p.pastSettled(300).leasesSince).toBe('t2');
    // an older scan answered late does not take it back
    p.scanned(second, 't1', true, 100);
    expect(p.pastSettled(300).leasesSince).toBe('t2');
    expect(p.pastSettled(60_000).leasesSince).toBeNull();
  });

  it('never passes a pending event a claim saw, leased ones included', () => {
    const p = new ClaimPositions(60_000, 0);
    p.record(T, '0', read(10, 20, 100, 110), 0, 1);
    p.record(T, '0', read(12, 30, 110, 120), 2, 3);
    p.record(T, '0', read(12, 40, 120, 130), 4, 5);
    expect(p.from(T, 6)).toBe('12');
  });

  it('waits settleMs between a claim and the later claim that makes it safe', () => {
    const p = new ClaimPositions(60_000, 100);
    p.record(T, '0', read(null, 20, 100, 110), 0, 1);
    p.record(T, '0', read(null, 30, 110, 120), 50, 51);
    p.record(T, '0', read(null, 30, 120, 130), 60, 61);
    expect(p.from(T, 62)).toBe('0');
    p.record(T, '0', read(null, 40, 130, 140), 200, 201);
    p.record(T, '0', read(null, null, 140, 150), 210, 211);
    // claim 4 (sent at 200) closed: the claims answered by 100 are safe, not claim 4 itself
    expect(p.from(T, 212)).toBe('31');
  });

  it('stays put while a transaction of an old snapshot is open, however many claims come', () => {
    const p = new ClaimPositions(60_000, 0);
    for (let i = 0; i < 100; i++) p.record(T, '0', read(null, 10 + i, 100, 110 + i), i * 2, i * 2 + 1);
    expect(p.from(T, 300)).toBe('0');
    // it ends: the marks kept (the latest 64) are enough to move on
    p.record(T, '0', read(null, null, 500, 500), 300, 301);
    expect(p.from(T, 302)).toBe('110');
  });

  it('scans from the start every fullScanMs, and such a scan takes the position back to a pending event below it', () => {
    const p = new ClaimPositions(1000, 0);
    p.record(T, '0', read(null, 20, 100, 100), 0, 1);
    p.record(T, '0', read(null, null, 101, 101), 2, 3);
    expect(p.from(T, 4)).toBe('21');
    // both claims scanned from the start: the period runs from the second
    expect(p.from(T, 1001)).toBe('21');
    expect(p.from(T, 1002)).toBe('0');
    // the full scan finds seq 15 pending (a transaction that took its seq before it had an id, and waited)
    p.record(T, '0', read(15, 15, 102, 102), 1002, 1003);
    expect(p.from(T, 1004)).toBe('15');
    // once it is settled, the position is back past what was proven; a scan from it does not restart the period
    p.record(T, '15', read(null, null, 103, 103), 1500, 1501);
    expect(p.from(T, 2001)).toBe('21');
    expect(p.from(T, 2002)).toBe('0');
  });

  it('every fullScanMs scans from where the position stood at the previous net, from the start every startScanMs', () => {
    const p = new ClaimPositions(1000, 0, 3000);
    p.record(T, '0', read(null, 20, 100, 100), 0, 1);
    p.record(T, '0', read(null, null, 101, 101), 2, 3);
    expect(p.from(T, 4)).toBe('21');
    // the position moves on past 40 and 60 between the nets
    p.record(T, '21', read(null, 40, 102, 102), 500, 501);
    p.record(T, '21', read(null, null, 103, 103), 502, 503);
    expect(p.from(T, 504)).toBe('41');
    // the first net, from where the position stood at the last scan from the start (0: the start itself)
    expect(p.from(T, 1002)).toBe('0');
    p.record(T, '0', read(null, null, 104, 104), 1002, 1003);
    p.record(T, '41', read(null, 60, 105, 105), 1500, 1501);
    p.record(T, '41', read(null, null, 106, 106), 1502, 1503);
    expect(p.from(T, 1504)).toBe('61');
    // the claims from 41 (where the net would scan from) were nets of their own: the next is due a period later,
    // from where the position stood when the last one was sent (41), not from 0
    expect(p.from(T, 2501)).toBe('61');
    expect(p.from(T, 2502)).toBe('41');
    expect(p.pastSettled(2502).seqs).toEqual(['41']);
    // it finds seq 45 pending (an insert that waited): the position goes back to it
    p.record(T, '41', read(45, 45, 107, 107), 2502, 2503);
    expect(p.from(T, 2504)).toBe('45');
    // the next net from 45, and startScanMs after the last scan from the start (the net sent at 1002) from 0
    expect(p.from(T, 4001)).toBe('45');
    expect(p.from(T, 4002)).toBe('0');
    expect(p.pastSettled(4002).tenants).toEqual([]);
  });

  it('has the due-tenant scan look at the leases since the previous net once per fullScanMs', () => {
    const p = new ClaimPositions(1000, 0, 3000);
    p.scanned(p.pastSettled(0), 't0', true, 0);
    p.scanned(p.pastSettled(100), 't1', true, 100);
    expect(p.pastSettled(200).leasesSince).toBe('t1');
    // a period on: since the last net (the scan from the start at 0), then since that net
    const net = p.pastSettled(1000);
    expect(net.leasesSince).toBe('t0');
    p.scanned(net, 't10', true, 1000);
    p.scanned(p.pastSettled(1100), 't11', true, 1100);
    expect(p.pastSettled(2000).leasesSince).toBe('t10');
    // every lease once per startScanMs
    expect(p.pastSettled(3000).leasesSince).toBeNull();
  });

  it("has a claim recover the leases expired since the tenant's last complete look, its net's once per fullScanMs", () => {
    const p = new ClaimPositions(1000, 0, 3000);
    /** A reading at the database time `s` seconds past 09:00, whose look at expired leases was `recovered`. */
    const looked = (s: number, recovered: boolean, xid: number): PositionReading => ({
      // a pending event at seq xid each time: the position moves on, so the claims between nets are not nets
      ...read(null, xid, xid, xid),
      now: `2026-12-06T09:00:${String(s).padStart(2, '0')}.000000Z`,
      recovered,
    });
    const claim = (sentAt: number, s: number, recovered: boolean, xid: number): void =>
      p.record(T, p.from(T, sentAt), looked(s, recovered, xid), sentAt, sentAt + 1, p.leasesSince(T, sentAt));
    // a tenant never claimed: every expired lease
    expect(p.leasesSince(T, 0)).toBeNull();
    claim(0, 1, true, 100);
    expect(p.leasesSince(T, 10)).toBe('2026-12-06T09:00:01.000000Z');
    // a look that took a full batch of expired leases (more may wait) does not move the bound
    claim(10, 2, false, 101);
    expect(p.leasesSince(T, 20)).toBe('2026-12-06T09:00:01.000000Z');
    claim(20, 3, true, 102);
    claim(30, 4, true, 103);
    expect(p.leasesSince(T, 40)).toBe('2026-12-06T09:00:04.000000Z');
    // a period after the last net (the claim sent at 10, from 0), the net looks again since the previous net's look:
    // what the looks between skipped (an event another transaction had locked) is found there
    expect(p.leasesSince(T, 1009)).toBe('2026-12-06T09:00:04.000000Z');
    expect(p.leasesSince(T, 1010)).toBe('2026-12-06T09:00:01.000000Z');
    claim(1010, 5, true, 104);
    claim(1020, 6, true, 105);
    expect(p.leasesSince(T, 1030)).toBe('2026-12-06T09:00:06.000000Z');
    expect(p.leasesSince(T, 2010)).toBe('2026-12-06T09:00:05.000000Z');
    // every lease once per startScanMs after the last scan from the start (the net at 1010 scanned from 0)
    expect(p.leasesSince(T, 4009)).not.toBeNull();
    expect(p.leasesSince(T, 4010)).toBeNull();
  });

  it('forgets a tenant not claimed for two full-scan periods', () => {
    const p = new ClaimPositions(1000, 0);
    p.record('a', '0', read(null, 20, 100, 100), 0, 1);
    p.record('b', '0', read(null, 20, 100, 100), 1500, 1501);
    p.from('b', 999);
    expect(p.size).toBe(2);
    p.from('b', 2000);
    expect(p.size).toBe(1);
    expect(p.from('a', 2000)).toBe('0');
  });

  it('starts over with a full scan of every tenant when the server changed (a failover, a restart)', () => {
    const p = new ClaimPositions(60_000, 0);
    p.record('a', '0', read(null, 20, 100, 100), 0, 1);
    p.record('a', '0', read(null, null, 101, 101), 2, 3);
    p.record('b', '0', read(null, 20, 100, 100), 4, 5);
    p.record('b', '0', read(null, null, 101, 101), 6, 7);
    expect([p.from('a', 8), p.from('b', 8)]).toEqual(['21', '21']);
    // a promoted standby: its sequence gave 15 again, and it may have lost a settlement
    p.record('a', '21', read(null, null, 90, 90, 'standby'), 8, 9);
    expect([p.from('a', 10), p.from('b', 10)]).toEqual(['0', '0']);
    p.record('a', '0', read(15, 15, 91, 91, 'standby'), 10, 11);
    expect(p.from('a', 12)).toBe('0');
  });

  it('keeps tenants apart', () => {
    const p = new ClaimPositions(60_000, 0);
    p.record('a', '0', read(null, 20, 100, 100), 0, 1);
    p.record('a', '0', read(null, null, 101, 101), 2, 3);
    expect(p.from('a', 4)).toBe('21');
    expect(p.from('b', 4)).toBe('0');
  });
  it('has the due-tenant scan look for an idle tenant from its start once per startScanMs, not on every scan', () => {
    // tenant T claimed (its position 21), then idle: it has no pending event, so no claim of it is made again;
    // tenant b is claimed on, and the due-tenant scan runs every 100 ms and lists every due tenant (complete).
    // The tiers promise a scan from the start once per startScanMs and one from the net's start once per
    // fullScanMs; under a held snapshot each costs the tenant's dead index entries (ADR 1206's addendum, at 240k
    // settled: 8,795 buffers unpositioned and 657 from a minute back, against 77 from the position)
    const p = new ClaimPositions(1000, 0, 3000);
    p.record(T, '0', read(null, 20, 100, 100), 0, 1);
    p.record(T, '0', read(null, null, 101, 101), 2, 3);
    expect(p.pastSettled(4).seqs).toEqual(['21']);
    let fromStart = 0;
    let fromBelow = 0;
    for (let now = 100; now <= 9000; now += 100) {
      p.from('b', now);
      const scan = p.pastSettled(now);
      const at = scan.tenants.indexOf(T);
      if (at < 0) fromStart++;
      else if (scan.seqs[at] !== '21') fromBelow++;
      p.scanned(scan, `t${now}`, true, now, new Set());
    }
    // at most one scan from the start per startScanMs (3 in 9 s) and one from the net's start per fullScanMs
    expect(fromBelow).toBeLessThanOrEqual(9);
    expect(fromStart).toBeLessThanOrEqual(3);
  });
  it('counts a scan as a tenant net only when it did not list the tenant (listed: its claim is the net)', () => {
    const p = new ClaimPositions(1000, 0, 3000);
    p.record(T, '0', read(null, 20, 100, 100), 0, 1);
    p.record(T, '0', read(null, null, 101, 101), 2, 3);
    // the net is due at 1,000: a scan that lists T (something pending from the net's start) is not its net
    // (its net starts at 0, the first claim's: the scan looks for T from its start, T is not among the positions)
    const listed = p.pastSettled(1100);
    expect(listed.tenants).toEqual([]);
    p.scanned(listed, 't1', true, 1100, new Set([T]));
    expect(p.pastSettled(1200).tenants).toEqual([]);
    // one that does not list it is: the next scans look from the position again
    p.scanned(p.pastSettled(1200), 't2', true, 1200, new Set());
    expect(p.pastSettled(1300).seqs).toEqual(['21']);
  });
});
