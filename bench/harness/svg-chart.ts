/**
 * Small SVG line charts for the bench's plots: a few series over time in one panel, panels side by side in one
 * picture, and a shaded span (the held snapshot). Pure text; `png-render.ts` turns it into a PNG.
 */

/** One line of a panel. */
export interface ChartSeries {
  name: string;
  /** `[x, y]` points in order of x; a point whose y is not finite breaks the line there. */
  points: readonly (readonly [number, number])[];
}

/** One panel: its title, axes and lines. */
export interface ChartPanel {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly ChartSeries[];
  /** A span of x to shade, with its caption (e.g. the held snapshot). */
  shade?: { from: number; to: number; label: string };
}

const WIDTH = 480;
const HEIGHT = 300;
const MARGIN = { top: 34, right: 16, bottom: 62, left: 64 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e'];
const TICKS = 5;

/** Panels in a grid of `columns`, as one SVG document. */
export function chartGrid(panels: readonly ChartPanel[], columns = 2): string {
  if (panels.length === 0) throw new Error('chartGrid needs at least one panel');
  const rows = Math.ceil(panels.length / columns);
  const width = WIDTH * Math.min(columns, panels.length);
  const height = HEIGHT * rows;
  const inner = panels
    .map((panel, i) => {
      const x = (i % columns) * WIDTH;
      const y = Math.floor(i / columns) * HEIGHT;
      return `<svg x="${x}" y="${y}" width="${WIDTH}" height="${HEIGHT}">${panelBody(panel)}</svg>`;
    })
    .join('\n');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">\n` +
    `<rect width="${width}" height="${height}" fill="#fff"/>\n${inner}\n</svg>\n`
  );
}

/** One panel as an SVG document of its own. */
export function lineChart(panel: ChartPanel): string {
  return chartGrid([panel], 1);
}

/** The panel's contents in a WIDTH × HEIGHT box. */
function panelBody(panel: ChartPanel): string {
  const points = panel.series
    .flatMap((s) => s.points)
    .filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const xs = points.map(([x]) => x);
  const ys = points.map(([, y]) => y);
  if (panel.shade) xs.push(panel.shade.from, panel.shade.to);
  const [x0, x1] = extent(xs, 0);
  const [y0, y1] = extent(ys, 0.05);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const sx = (x: number): number => MARGIN.left + ((x - x0) / (x1 - x0)) * plotW;
  const sy = (y: number): number => MARGIN.top + plotH - ((y - y0) / (y1 - y0)) * plotH;
  const parts: string[] = [
    `<text x="${WIDTH / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">${escape(panel.title)}</text>`,
  ];
  if (panel.shade) {
    const a = sx(panel.shade.from);
    const b = sx(panel.shade.to);
    parts.push(
      `<rect x="${n(a)}" y="${MARGIN.top}" width="${n(b - a)}" height="${plotH}" fill="#f2c14e" fill-opacity="0.25"/>`,
      `<text x="${n((a + b) / 2)}" y="${MARGIN.top + 12}" text-anchor="middle" fill="#8a6d00">${escape(panel.shade.label)}</text>`,
    );
  }
  for (const yv of ticks(y0, y1)) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${n(sy(yv))}" y2="${n(sy(yv))}" stroke="#e5e5e5"/>`,
      `<text x="${MARGIN.left - 6}" y="${n(sy(yv) + 4)}" text-anchor="end">${tick(yv)}</text>`,
    );
  }
  for (const xv of ticks(x0, x1)) {
    parts.push(
      `<text x="${n(sx(xv))}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${tick(xv)}</text>`,
    );
  }
  parts.push(
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#888"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${MARGIN.top + plotH + 32}" text-anchor="middle">${escape(panel.xLabel)}</text>`,
    `<text transform="translate(14 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escape(panel.yLabel)}</text>`,
  );
  let lx = MARGIN.left;
  panel.series.forEach((series, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    const path = pathOf(series.points, sx, sy);
    if (path) parts.push(`<path d="${path}" fill="none" stroke="${colour}" stroke-width="1.8"/>`);
    const ly = HEIGHT - 10;
    parts.push(
      `<line x1="${lx}" x2="${lx + 18}" y1="${ly - 4}" y2="${ly - 4}" stroke="${colour}" stroke-width="2.5"/>`,
      `<text x="${lx + 22}" y="${ly}">${escape(series.name)}</text>`,
    );
    lx += 22 + series.name.length * 6.5 + 16;
  });
  return parts.join('\n');
}

/** An SVG path through the finite points; a non-finite y starts a new segment. */
function pathOf(
  points: readonly (readonly [number, number])[],
  sx: (x: number) => number,
  sy: (y: number) => number,
): string {
  let path = '';
  let pen = 'M';
  for (const [x, y] of points) {
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      pen = 'M';
      continue;
    }
    path += `${pen}${n(sx(x))},${n(sy(y))} `;
    pen = 'L';
  }
  return path.trim();
}

/** The range of the values from zero (when none is negative), never empty, its top raised by `headroom`. */
function extent(values: readonly number[], headroom: number): [number, number] {
  if (values.length === 0) return [0, 1];
  const lo = Math.min(0, ...values);
  let hi = Math.max(...values);
  if (hi === lo) hi = lo + 1;
  return [lo, lo + (hi - lo) * (1 + headroom)];
}

/** Round values between `lo` and `hi` for the grid: steps of 1, 2 or 5 times a power of ten, about TICKS of them. */
export function ticks(lo: number, hi: number): number[] {
  const raw = (hi - lo) / TICKS;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  const values: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    values.push(Number(v.toPrecision(12)));
  return values;
}

function tick(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (abs >= 1e4) return `${(value / 1e3).toFixed(0)}k`;
  if (abs >= 10 || Number.isInteger(value)) return value.toFixed(0);
  if (abs >= 1) return value.toFixed(1);
  return String(Number(value.toPrecision(2)));
}

function n(value: number): string {
  return value.toFixed(1);
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
