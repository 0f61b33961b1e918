import { chartGrid, lineChart, ticks, type ChartPanel } from './svg-chart';

const panel: ChartPanel = {
  title: 'Commit → handler <p99>',
  xLabel: 'minutes',
  yLabel: 'ms',
  series: [
    {
      name: 'p50',
      points: [
        [0, 1],
        [1, 2],
        [2, 4],
      ],
    },
    {
      name: 'p99',
      points: [
        [0, 10],
        [1, Number.NaN],
        [2, 20],
      ],
    },
  ],
  shade: { from: 0.5, to: 1.5, label: 'snapshot held' },
};

function paths(svg: string): string[] {
  return [...svg.matchAll(/<path d="([^"]*)"/g)].map((m) => m[1]!);
}

describe('lineChart', () => {
  it('draws one path per series, each through its points from left to right', () => {
    const [p50, p99] = paths(lineChart(panel));
    const xs = [...p50!.matchAll(/[ML]([\d.]+),/g)].map((m) => Number(m[1]));
    expect(xs).toHaveLength(3);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    // a missing value breaks the line: two moves, no line between them
    expect(p99!.match(/M/g)).toHaveLength(2);
    expect(p99).not.toContain('L');
  });

  it('puts a higher value higher on the page', () => {
    const [p50] = paths(lineChart(panel));
    const ys = [...p50!.matchAll(/,([\d.]+)/g)].map((m) => Number(m[1]));
    expect(ys[0]).toBeGreaterThan(ys[1]!);
    expect(ys[1]).toBeGreaterThan(ys[2]!);
  });

  it('shades the span, names every series and escapes the text', () => {
    const svg = lineChart(panel);
    expect(svg).toContain('fill="#f2c14e"');
    expect(svg).toContain('snapshot held');
    expect(svg).toContain('>p50<');
    expect(svg).toContain('>p99<');
    expect(svg).toContain('Commit → handler &lt;p99&gt;');
    expect(svg).not.toContain('<p99>');
  });

  it('draws a panel whose series are all empty without dividing by zero', () => {
    const svg = lineChart({
      title: 'empty',
      xLabel: 'x',
      yLabel: 'y',
      series: [{ name: 'none', points: [] }],
    });
    expect(svg).not.toContain('NaN');
    expect(svg).not.toContain('Infinity');
  });
});

describe('chartGrid', () => {
  it('lays the panels out in rows of the given width', () => {
    const svg = chartGrid([panel, panel, panel, panel, panel], 3);
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg" width="1440" height="600"/);
    expect(svg.match(/<svg x=/g)).toHaveLength(5);
    expect(svg).toContain('<svg x="480" y="300"');
  });

  it('refuses an empty grid', () => {
    expect(() => chartGrid([])).toThrow('at least one panel');
  });
});

describe('ticks', () => {
  it('steps by 1, 2 or 5 times a power of ten', () => {
    expect(ticks(0, 10)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(ticks(0, 23)).toEqual([0, 5, 10, 15, 20]);
    expect(ticks(0, 0.9)).toEqual([0, 0.2, 0.4, 0.6, 0.8]);
    expect(ticks(0, 120_000)).toEqual([0, 50_000, 100_000]);
  });
});
