import { pairedDifference, turnRatios } from './stats';

describe('turnRatios', () => {
  it('gives the ratio of the medians and the range of the ratios within a turn', () => {
    // the machine slows in turn 2: both sides pay, the ratio within each turn stays near 1.1
    const r = turnRatios([110, 220, 121], [100, 200, 100]);
    expect(r.ratio).toBeCloseTo(121 / 100);
    expect(r.min).toBeCloseTo(1.1);
    expect(r.max).toBeCloseTo(1.21);
  });

  it('pairs each turn with itself, not the sorted values', () => {
    const r = turnRatios([90, 300], [300, 100]);
    expect(r.min).toBeCloseTo(0.3);
    expect(r.max).toBeCloseTo(3);
    expect(r.ratio).toBeCloseTo(195 / 200);
  });

  it('is NaN without turns', () => {
    expect(turnRatios([], [])).toEqual({ ratio: NaN, min: NaN, max: NaN });
  });

  it('refuses sides of different lengths', () => {
    expect(() => turnRatios([1, 2], [1])).toThrow('one figure per side and turn, got 2 against 1');
  });
});

describe('pairedDifference', () => {
  it('takes the median and quartiles of the differences within each pair, not of each side', () => {
    // the machine slows in pairs 3 and 4: both sides pay; within a pair `a` stays 10 to 30 above `b`
    const d = pairedDifference([110, 230, 420, 1030], [100, 200, 400, 1010]);
    expect(d).toEqual({ median: 20, q1: 10, q3: 20, pairs: 4 });
    // the difference of the sides' medians mixes pairs: (230 + 420) / 2 − (200 + 400) / 2 = 25
  });

  it('leaves out a pair with a side not finite', () => {
    expect(pairedDifference([5, NaN, 7], [1, 2, Infinity])).toEqual({ median: 4, q1: 4, q3: 4, pairs: 1 });
  });

  it('is NaN without pairs', () => {
    expect(pairedDifference([], [])).toEqual({ median: NaN, q1: NaN, q3: NaN, pairs: 0 });
  });

  it('refuses sides of different lengths', () => {
    expect(() => pairedDifference([1, 2], [1])).toThrow('one figure per side and pair, got 2 against 1');
  });
});
