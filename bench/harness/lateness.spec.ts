import { dueInstants, epochOf, lateness, latenessFigures } from './lateness';

describe('lateness', () => {
  it('spreads due instants evenly over the span, first and last included', () => {
    expect(dueInstants(10_000, 5, 1000, 2000)).toEqual([11_000, 11_500, 12_000, 12_500, 13_000]);
    expect(dueInstants(0, 1, 1000, 2000)).toEqual([1000]);
    expect(dueInstants(0, 0, 1000, 2000)).toEqual([]);
  });

  it('turns a monotonic reading into epoch ms from the time origin', () => {
    expect(epochOf(250.5, 1_700_000_000_000)).toBe(1_700_000_000_250.5);
  });

  it('takes handler start − due per event handled and counts the ones never handled', () => {
    const due = new Map([
      ['a', 1000],
      ['b', 2000],
      ['c', 3000],
    ]);
    const handled = new Map([
      ['a', 1012],
      ['b', 1990],
      ['x', 5000],
    ]);
    const { lateMs, missing } = lateness(due, handled);
    expect(lateMs.sort((x, y) => x - y)).toEqual([-10, 12]);
    expect(missing).toBe(1);
  });

  it('gives p50, p99 and the earliest, NaN without events', () => {
    const lateMs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(latenessFigures(lateMs)).toEqual({ p50: 50, p99: 99, min: 1 });
    expect(latenessFigures([])).toEqual({ p50: NaN, p99: NaN, min: NaN });
  });
});
