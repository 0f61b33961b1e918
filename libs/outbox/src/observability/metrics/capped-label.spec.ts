import { CappedLabel } from './capped-label';

describe('CappedLabel', () => {
  it('keeps the first max values seen and gives every later one the overflow value', () => {
    const label = new CappedLabel(2);
    expect(['a', 'b', 'c', 'a', 'd', 'b'].map((value) => label.of(value, 'other'))).toEqual([
      'a',
      'b',
      'other',
      'a',
      'other',
      'b',
    ]);
  });

  it('takes at most max + 1 values, however many it is asked about', () => {
    const label = new CappedLabel(3);
    const values = new Set(Array.from({ length: 100 }, (_, i) => label.of(`name-${i}`, 'other')));
    expect(values.size).toBe(4);
  });

  it('keeps what it has seen per instance', () => {
    const first = new CappedLabel(1);
    const second = new CappedLabel(1);
    expect(first.of('a', 'other')).toBe('a');
    expect(second.of('b', 'other')).toBe('b');
    expect(first.of('b', 'other')).toBe('other');
  });
});
