import { turnRatios } from './stats';

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
