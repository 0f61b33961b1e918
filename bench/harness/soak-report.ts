/** How the soak tells what it saw: a line per window, the hold's figures and the doctor's calls, the data and plots. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OutboxDoctorReport } from 'nestjs-pg-outbox/admin';
import type { BenchContext } from './bench-scenario';
import { renderPng, svgSize } from './png-render';
import type { SnapshotHolder } from './snapshot-holder';
import { soakPlots } from './soak-plots';
import { holdFigures, type HoldFigures, type holdEffect, type SoakWindow } from './soak-windows';

const MiB = 1024 * 1024;

/** One call of the doctor during the run. */
export interface DoctorCall {
  atS: number;
  holding: boolean;
  severity: string;
  /** Whether a non-ok `transactions` finding names the holder's pid. */
  namesHolder: boolean;
  holderSummary: string | null;
  /** Every finding that is not ok, as `check: summary`. */
  problems: string[];
}

/** What one call of the doctor said of the holder, and what else it found. */
export function doctorCall(
  found: OutboxDoctorReport,
  atS: number,
  holder: SnapshotHolder | null,
): DoctorCall {
  const holding = holder !== null && !holder.isReleased;
  const finding = holder
    ? found.findings.find(
        (f) => f.check === 'transactions' && f.severity !== 'ok' && f.figures.pid === holder.pid,
      )
    : undefined;
  return {
    atS: Math.round(atS),
    holding,
    severity: found.severity,
    namesHolder: finding !== undefined,
    holderSummary: finding?.summary ?? null,
    problems: found.findings
      .filter((f) => f.severity !== 'ok')
      .map((f) => `${f.check} (${f.severity}): ${f.summary}`),
  };
}

/** One line per window, as the run goes. */
export function describeWindow(w: SoakWindow): string {
  const ms = (v: number | null): string =>
    v === null || !Number.isFinite(v) ? 'n/a' : v.toFixed(v < 10 ? 2 : 0);
  const k = (v: number): string => (v >= 1000 ? `${(v / 1000).toFixed(1)}k` : String(v));
  return (
    `w${w.index + 1} ${w.startS.toFixed(0)}–${w.endS.toFixed(0)} s: ${(w.sizeBytes / MiB).toFixed(1)} MiB ` +
    `(indexes ${(w.indexBytes / MiB).toFixed(1)}), dead ${k(w.deadTuples)}, purged ${k(w.purgedEvents)}` +
    (w.ranges > 0 || w.rangesDropped > 0
      ? `, ranges ${w.ranges} (+${w.rangesMade} made, −${w.rangesDropped} dropped)`
      : '') +
    `; ` +
    `p50/p99 ${ms(w.p50Ms)}/${ms(w.p99Ms)} ms; ${w.eventsPerS.toFixed(0)} events/s, backlog ${k(w.backlog)}; ` +
    `CPU/event node ${ms(w.nodeCpuPerEventMs)} + relay pg ${ms(w.relayBackendCpuPerEventMs)} ` +
    `(+ producer pg ${ms(w.producerBackendCpuPerEventMs)}) ms; claim ${ms(w.claimMeanMs)} ms × ${w.claimCalls ?? 'n/a'}, ` +
    `due scan ${ms(w.dueScanMeanMs)} ms; RSS ${(w.rssBytes / MiB).toFixed(0)} MiB; ` +
    `this process ${(w.nodeCores * 100).toFixed(0)}% of a core, load average ${w.loadAverage.toFixed(1)}` +
    (w.fanOuts ? `; fan-outs ${describeCounts(w.fanOuts)}` : '') +
    (w.heldS > 0 ? ` [held ${w.heldS < 1 ? '< 1' : w.heldS.toFixed(0)} s]` : '')
  );
}

/** `stale 12, routes 3`, most first, or `none`. */
function describeCounts(counts: Record<string, number>): string {
  const entries = Object.entries(counts).sort(([a, x], [b, y]) => y - x || a.localeCompare(b));
  return entries.length === 0 ? 'none' : entries.map(([key, n]) => `${key} ${n}`).join(', ');
}

/** The window's costliest statements, one per line: mean execution and buffers per call, calls. */
export function describeStatements(w: SoakWindow): string {
  return w.statements
    .map(
      (s) =>
        `  w${w.index + 1} ${(s.execMs / s.calls).toFixed(3)} ms, ${(s.buffers / s.calls).toFixed(0)} buffers per call × ${s.calls} ` +
        `(${(s.execMs / 1000).toFixed(2)} s): ${s.query.slice(0, 110)}`,
    )
    .join('\n');
}

/**
 * The hold's figures against the minutes before it (issue 39's goals among them, judged at the end of the hold as
 * the issue states them; the held window with the slowest claim printed beside, unjudged), and the doctor's calls.
 */
export function reportHold(
  context: BenchContext,
  effect: NonNullable<ReturnType<typeof holdEffect>>,
  calls: readonly DoctorCall[],
  span: { startS: number; endS: number },
): void {
  const { report } = context;
  const { before, beforeWindows, end, worst, after } = effect;
  const windowsNamed = (ws: readonly SoakWindow[]): string =>
    ws.length === 1
      ? `window ${ws[0]!.index + 1}`
      : `the median of windows ${ws.map((w) => w.index + 1).join(', ')}`;
  report.note(
    `hold ${span.startS.toFixed(0)}–${span.endS.toFixed(0)} s: before = ${windowsNamed(beforeWindows)}; the end of the hold = ` +
      `window ${end.index + 1}; the worst held claim = window ${worst.index + 1}` +
      (after ? `; the first after = window ${after.index + 1}` : ''),
  );
  const line = (
    label: string,
    value: number | null,
    versus: number | null,
    unit: string,
    target?: number,
  ): void => {
    if (value === null || versus === null) return;
    report.add({
      scenario: 'soak',
      label,
      value,
      unit,
      versus: { label: 'before the hold', value: versus },
      goal: target === undefined ? undefined : { on: 'ratio', op: '<=', target },
    });
  };
  const lines = (
    label: string,
    at: HoldFigures,
    goals: { claim?: number; p99?: number; cpu?: number } = {},
  ): void => {
    line(`${label}: claim mean execution per call`, at.claimMeanMs, before.claimMeanMs, 'ms', goals.claim);
    line(`${label}: commit → handler p99`, at.p99Ms, before.p99Ms, 'ms', goals.p99);
    line(
      `${label}: relay CPU per event, node + relay pg`,
      at.cpuPerEventMs,
      before.cpuPerEventMs,
      'ms',
      goals.cpu,
    );
  };
  // issue 39's goals, judged at the end of the hold
  lines('end of the hold (issue 39)', holdFigures(end), { claim: 2, p99: 2, cpu: 1.2 });
  line('end of the hold: dead tuples of the outbox tables', end.deadTuples, before.deadTuples, '');
  line('end of the hold: due-tenant scan per call', end.dueScanMeanMs, before.dueScanMeanMs, 'ms');
  if (worst !== end) lines(`held, the slowest claim (window ${worst.index + 1})`, holdFigures(worst));
  if (after) lines('after the hold', holdFigures(after));
  const during = calls.filter((c) => c.holding);
  const named = during.filter((c) => c.namesHolder).length;
  report.note(
    `doctor during the hold: named the holder in ${named} of ${during.length} calls` +
      (during.find((c) => c.holderSummary)?.holderSummary
        ? ` — "${during.find((c) => c.holderSummary)!.holderSummary}"`
        : ''),
  );
  const beforeCall = calls.find((c) => !c.holding);
  if (beforeCall)
    report.note(
      `doctor before the hold: ${beforeCall.problems.length === 0 ? 'nothing to report' : beforeCall.problems.join(' | ')}`,
    );
}

/** Writes the run's JSON, its SVG plots and, where Chromium is, their PNG; says where. */
export async function writeOutcome(
  context: BenchContext,
  outcome: Record<string, unknown>,
  windows: readonly SoakWindow[],
  hold: { startS: number; endS: number } | null,
): Promise<void> {
  const { report, options } = context;
  const dir = options.soak.outDir;
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const base = join(
    dir,
    `soak-${stamp}${options.soak.holdSeconds > 0 ? `-hold${options.soak.holdSeconds}` : ''}`,
  );
  writeFileSync(`${base}.json`, `${JSON.stringify(outcome, null, 2)}\n`);
  const svg = soakPlots(windows, hold);
  writeFileSync(`${base}.svg`, svg);
  const { width, height } = svgSize(svg);
  const problem = await renderPng(svg, width, height, `${base}.png`);
  report.note(`data: ${base}.json; plots: ${base}.svg${problem ? '' : ` and ${base}.png`}`);
  if (problem) report.note(`WARNING ${problem}`);
}
