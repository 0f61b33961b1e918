/** Collects the figures of a run, prints one line per figure as it comes, and builds the JSON summary. */

/** A target on a figure: on its ratio to what it is compared with, or on its own value. */
export interface Goal {
  on: 'ratio' | 'value';
  op: '>=' | '<=';
  target: number;
  /** A second, harder target, reported but not counted as a miss. */
  stretch?: number;
}

/** One measured figure. */
export interface FigureInput {
  /** Short scenario tag printed in brackets: `enqueue`, `relay`, … */
  scenario: string;
  label: string;
  value: number;
  unit: string;
  /** What the value is compared with: usually the raw-SQL baseline of the same run. */
  versus?: { label: string; value: number };
  goal?: Goal;
  /** Printed after the line, e.g. how it was measured. */
  note?: string;
}

/** A figure as recorded, with its ratio and goal outcome. */
export interface Figure extends FigureInput {
  ratio: number | null;
  met: boolean | null;
  stretchMet: boolean | null;
}

/** Everything `--json` prints. */
export interface BenchSummary {
  quick: boolean;
  startedAt: string;
  durationS: number;
  environment: Record<string, unknown>;
  figures: Figure[];
  goals: { met: number; missed: number; missedLabels: string[] };
}

const LABEL_WIDTH = 58;

/** The report of one run. Lines go to `write` (stdout, or stderr when stdout carries JSON). */
export class BenchReport {
  private readonly figures: Figure[] = [];
  private readonly startedAt = new Date();
  private environment: Record<string, unknown> = {};

  constructor(private readonly write: (line: string) => void) {}

  /** Prints the header block and keeps it for the JSON summary. */
  header(title: string, environment: Record<string, unknown>, lines: readonly string[]): void {
    this.environment = environment;
    this.write(title);
    for (const line of lines) this.write(`  ${line}`);
  }

  section(title: string): void {
    this.write('');
    this.write(`== ${title}`);
  }

  /** A line that is not a figure (how something was measured, a warning). */
  note(text: string): void {
    this.write(`   · ${text}`);
  }

  add(input: FigureInput): Figure {
    const { versus, goal } = input;
    const ratio =
      versus && versus.value !== 0 && Number.isFinite(versus.value) ? input.value / versus.value : null;
    const judged = goal?.on === 'ratio' ? ratio : input.value;
    const judgeable = judged !== null && Number.isFinite(judged);
    // A goal whose figure could not be measured counts as missed.
    const met = goal ? judgeable && compare(judged, goal.op, goal.target) : null;
    const stretchMet =
      goal?.stretch !== undefined ? judgeable && compare(judged, goal.op, goal.stretch) : null;
    const figure: Figure = { ...input, ratio, met, stretchMet };
    this.figures.push(figure);
    this.write(formatFigure(figure));
    if (input.note) this.note(input.note);
    return figure;
  }

  /** Prints the goal tally and returns the summary for `--json`. */
  finish(): BenchSummary {
    const judged = this.figures.filter((f) => f.met !== null);
    const missed = judged.filter((f) => f.met === false);
    this.write('');
    this.write(`== goals: ${judged.length - missed.length} met, ${missed.length} missed`);
    for (const f of missed) this.write(`   missed: [${f.scenario}] ${f.label}`);
    return {
      quick: Boolean(this.environment.quick),
      startedAt: this.startedAt.toISOString(),
      durationS: Math.round((Date.now() - this.startedAt.getTime()) / 100) / 10,
      environment: this.environment,
      figures: this.figures,
      goals: {
        met: judged.length - missed.length,
        missed: missed.length,
        missedLabels: missed.map((f) => `[${f.scenario}] ${f.label}`),
      },
    };
  }
}

function compare(value: number, op: Goal['op'], target: number): boolean {
  return op === '>=' ? value >= target : value <= target;
}

function formatFigure(f: Figure): string {
  const head = `[${f.scenario}] ${f.label}`;
  const parts = [`${head.padEnd(LABEL_WIDTH)} ${formatValue(f.value, f.unit).padStart(14)}`];
  if (f.versus) parts.push(`vs ${f.versus.label} ${formatValue(f.versus.value, f.unit)}`);
  if (f.ratio !== null) parts.push(`= ${formatRatio(f.ratio)}`);
  if (f.goal) {
    const target = f.goal.on === 'ratio' ? formatRatio(f.goal.target) : formatValue(f.goal.target, f.unit);
    const op = f.goal.op === '>=' ? '≥' : '≤';
    let verdict = `goal ${op} ${target}: ${f.met ? 'met' : 'MISSED'}`;
    if (f.goal.stretch !== undefined) {
      const stretch =
        f.goal.on === 'ratio' ? formatRatio(f.goal.stretch) : formatValue(f.goal.stretch, f.unit);
      verdict += ` (stretch ${op} ${stretch}: ${f.stretchMet ? 'met' : 'not met'})`;
    }
    parts.push(verdict);
  }
  return parts.join('   ');
}

/** Three decimals below 10, so that a ratio just under its goal never prints as equal to it. */
function formatRatio(ratio: number): string {
  return `${ratio >= 10 ? ratio.toFixed(1) : ratio.toFixed(3)}×`;
}

/** A value with its unit, rounded for reading: counts grouped by thousands, times to two significant decimals. */
export function formatValue(value: number, unit: string): string {
  if (!Number.isFinite(value)) return `n/a ${unit}`.trim();
  const abs = Math.abs(value);
  const digits = abs >= 1000 ? 0 : abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  const text = value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
  return unit ? `${text} ${unit}` : text;
}
