import { ClaimFloor, type FloorReading } from './claim-floor';
import { NIL_UUID } from '../model/outbox.constants';

const T = 'tenant';
const U = 'other-tenant';
/** Ids in order: A < B < C. */
const A = '01900000-0000-7000-8000-000000000000';
const B = '01910000-0000-7000-8000-000000000000';
const C = '01920000-0000-7000-8000-000000000000';

/** A tenant's id, in the order of `n`. */
const tenant = (n: number): string => `${n}0000000-0000-4000-8000-000000000000`;

/** A reading: the floor (null: today's layout), a snapshot `xmin:xmax`. */
const read = (floor: string | null, xmin: number, xmax: number, server = 'primary'): FloorReading => ({
  floor,
  open: floor,
  xmin: String(xmin),
  xmax: String(xmax),
  server,
});

/** A floor whose tenants had their full scan at 0 (so `of(T, 1)` gives the bound). */
function floorAfterFullScans(): ClaimFloor {
  const f = new ClaimFloor(600_000, 5_000, 60_000);
  f.of(T, 0);
  f.of(U, 0);
  return f;
}

describe('ClaimFloor', () => {
  it('has no bound before a reading is proven', () => {
    const f = floorAfterFullScans();
    f.record(read(B, 100, 110));
    expect(f.of(T, 1)).toBe(NIL_UUID);
  });

  it('raises the bound only once every transaction open at a reading has ended, to the lower of the two readings', () => {
    const f = floorAfterFullScans();
    f.record(read(B, 100, 110));
    // 100..109 may still be running (xmin 105): the first reading is not proven
    f.record(read(C, 105, 120));
    expect(f.of(T, 1)).toBe(NIL_UUID);
    // every transaction below 110 ended: the first reading proven, bounded by this one (A, work seen below B since)
    f.record(read(A, 110, 130));
    expect(f.of(T, 1)).toBe(A);
    // the reading at xmax 130 proven by the next: the bound rises to the lower of it and the new one
    f.record(read(C, 130, 140));
    expect(f.of(T, 1)).toBe(A);
    f.record(read(C, 140, 150));
    expect(f.of(T, 1)).toBe(C);
  });

  it('lowers the bound at once', () => {
    const f = floorAfterFullScans();
    f.record(read(C, 100, 110));
    f.record(read(C, 110, 120));
    expect(f.of(T, 1)).toBe(C);
    // a replay brought back work in an older range: the next reading lowers the bound, proven or not
    f.record(read(A, 115, 130));
    expect(f.of(T, 1)).toBe(A);
  });

  it('gives each tenant a claim without the bound every full-scan period', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    f.record(read(B, 100, 110));
    f.record(read(B, 110, 120));
    expect(f.of(T, 0)).toBe(NIL_UUID);
    expect(f.of(T, 1)).toBe(B);
    expect(f.of(U, 1)).toBe(NIL_UUID);
    expect(f.of(T, 59_999)).toBe(B);
    expect(f.of(T, 60_000)).toBe(NIL_UUID);
    expect(f.of(T, 60_001)).toBe(B);
  });

  it('has no bound on today’s layout, after a failed reading, or on another server until proven again', () => {
    const f = floorAfterFullScans();
    f.record(read(null, 100, 110));
    f.record(read(null, 110, 120));
    expect(f.of(T, 1)).toBe(NIL_UUID);
    f.record(read(B, 120, 130));
    f.record(read(B, 130, 140));
    expect(f.of(T, 1)).toBe(B);
    f.failed();
    expect(f.of(T, 1)).toBe(NIL_UUID);
    f.record(read(B, 140, 150));
    f.record(read(B, 150, 160));
    expect(f.of(T, 1)).toBe(B);
    // a promoted standby: xids of the old server prove nothing there
    f.record(read(C, 160, 170, 'standby'));
    expect(f.of(T, 1)).toBe(NIL_UUID);
    f.record(read(C, 170, 180, 'standby'));
    expect(f.of(T, 1)).toBe(C);
  });

  it('bounds the due-tenant scan but for a sweep without the bound every full-scan period, the first scan too', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    f.record(read(B, 100, 110));
    f.record(read(B, 110, 120));
    expect(f.ofScan(null, 1)).toBe(NIL_UUID);
    // it listed every due tenant: the sweep is over
    f.scanned(null, [tenant(1)], 100);
    expect(f.ofScan(null, 2)).toBe(B);
    expect(f.ofScan(null, 60_000)).toBe(B);
    expect(f.ofScan(null, 60_001)).toBe(NIL_UUID);
  });

  it('sweeps from the scan’s cursor round the tenants’ ids to where it began, over as many scans as it takes', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    f.record(read(B, 100, 110));
    f.record(read(B, 110, 120));
    f.ofScan(null, 0);
    f.scanned(null, [], 2);
    expect(f.ofScan(tenant(5), 60_000)).toBe(NIL_UUID);
    f.scanned(tenant(5), [tenant(6), tenant(7)], 2);
    expect(f.ofScan(tenant(7), 60_001)).toBe(NIL_UUID);
    // past the highest id, from the lowest again: not yet back where it began
    f.scanned(tenant(7), [tenant(8), tenant(2)], 2);
    expect(f.ofScan(tenant(2), 60_002)).toBe(NIL_UUID);
    f.scanned(tenant(2), [tenant(3), tenant(5)], 2);
    expect(f.ofScan(tenant(5), 60_003)).toBe(B);
    // one that began from the first tenant ends once its scans wrapped round
    expect(f.ofScan(null, 120_003)).toBe(NIL_UUID);
    f.scanned(null, [tenant(1), tenant(4)], 2);
    expect(f.ofScan(tenant(4), 120_004)).toBe(NIL_UUID);
    f.scanned(tenant(4), [tenant(9), tenant(1)], 2);
    expect(f.ofScan(tenant(1), 120_005)).toBe(B);
  });

  it('starts a sweep over when a scan comes from elsewhere than where it got to', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    f.record(read(B, 100, 110));
    f.record(read(B, 110, 120));
    expect(f.ofScan(tenant(5), 0)).toBe(NIL_UUID);
    f.scanned(tenant(5), [tenant(6), tenant(7)], 2);
    // the round's cursor was reset (a failed round): the sweep starts over from the first tenant
    expect(f.ofScan(null, 1)).toBe(NIL_UUID);
    f.scanned(null, [tenant(1), tenant(6)], 2);
    expect(f.ofScan(tenant(6), 2)).toBe(NIL_UUID);
    f.scanned(tenant(6), [tenant(7), tenant(8)], 2);
    expect(f.ofScan(tenant(8), 3)).toBe(NIL_UUID);
    f.scanned(tenant(8), [tenant(9), tenant(1)], 2);
    expect(f.ofScan(tenant(1), 4)).toBe(B);
  });

  it('gives a tenant’s next claim after a sweep began no bound, so what the sweep lists below the floor is claimed', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    f.record(read(B, 100, 110));
    f.record(read(B, 110, 120));
    f.ofScan(null, 0);
    f.scanned(null, [], 10);
    expect(f.of(T, 30_000)).toBe(NIL_UUID);
    expect(f.of(T, 30_001)).toBe(B);
    expect(f.ofScan(null, 60_000)).toBe(NIL_UUID);
    // its own full scan is 30 s away
    expect(f.of(T, 60_001)).toBe(NIL_UUID);
    expect(f.of(T, 60_002)).toBe(B);
  });

  it('asks for a reading once per refresh period', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    expect(f.due(0)).toBe(true);
    expect(f.due(4_999)).toBe(false);
    expect(f.due(5_000)).toBe(true);
  });
  it('reads from the last reading’s open floor and xmin, every range each full-scan period and after a failure', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    // no reading yet: every range
    expect(f.from(0)).toMatchObject({ openFrom: null, since: null });
    f.record({ ...read(B, 100, 110), open: A });
    expect(f.from(5_000)).toMatchObject({ openFrom: A, since: '100' });
    // each reading's pair: its open floor with its own xmin
    f.record({ ...read(C, 120, 130), open: B });
    expect(f.from(10_000)).toMatchObject({ openFrom: B, since: '120' });
    // the full-scan period since the last reading of every range (at 0)
    expect(f.from(60_000)).toMatchObject({ openFrom: null, since: null });
    expect(f.from(65_000)).toMatchObject({ openFrom: B, since: '120' });
    f.failed();
    expect(f.from(70_000)).toMatchObject({ openFrom: null, since: null });
    // today's layout: no open floor
    f.record(read(null, 140, 150));
    expect(f.from(75_000)).toMatchObject({ openFrom: null, since: null });
  });
  it('keeps the open floor of the last reading sent, not of one sent before it that returns late', () => {
    const f = new ClaimFloor(600_000, 5_000, 60_000);
    const early = f.from(0).sent;
    const late = f.from(1).sent;
    f.record({ ...read(B, 120, 130), open: A }, late);
    f.record({ ...read(C, 110, 120), open: C }, early);
    expect(f.from(2)).toMatchObject({ openFrom: A, since: '120' });
  });
});
