/**
 * The soak's plots from its windows: size, dead tuples, latency, claim time, throughput, CPU per event, memory,
 * and how busy the machine was.
 */
import { chartGrid, type ChartPanel, type ChartSeries } from './svg-chart';
import type { SoakWindow } from './soak-windows';

const MiB = 1024 * 1024;

/**
 * Eight panels over the run (x: minutes at each window's end), a ninth of the ranges kept, made and dropped on the
 * partitioned layout; the held snapshot shaded.
 */
export function soakPlots(
  windows: readonly SoakWindow[],
  hold: { startS: number; endS: number } | null,
): string {
  const at = (w: SoakWindow): number => w.endS / 60;
  const line = (name: string, y: (w: SoakWindow) => number | null): ChartSeries => ({
    name,
    points: windows.map((w) => [at(w), y(w) ?? Number.NaN] as const),
  });
  const shade = hold ? { from: hold.startS / 60, to: hold.endS / 60, label: 'snapshot held' } : undefined;
  const panel = (title: string, yLabel: string, series: ChartSeries[]): ChartPanel => ({
    title,
    xLabel: 'minutes',
    yLabel,
    series,
    shade,
  });
  const panels = [
    panel('Outbox tables + indexes', 'MiB', [
      line('tables', (w) => w.tableBytes / MiB),
      line('indexes', (w) => w.indexBytes / MiB),
    ]),
    panel('Dead tuples', 'rows', [
      line('all outbox tables', (w) => w.deadTuples),
      line('events', (w) => w.deadByTable.event_outbox ?? null),
      line('leases', (w) => w.deadByTable.outbox_event_leases ?? null),
    ]),
    panel('Commit → handler', 'ms', [line('p50', (w) => w.p50Ms), line('p99', (w) => w.p99Ms)]),
    panel('Claim, mean execution per call', 'ms', [
      line('claim', (w) => w.claimMeanMs),
      line('due-tenant scan', (w) => w.dueScanMeanMs),
    ]),
    panel('Relay throughput', 'events/s', [line('handled', (w) => w.eventsPerS)]),
    panel('CPU per event', 'ms', [
      line('node (producer + relay)', (w) => w.nodeCpuPerEventMs),
      line('relay backends', (w) => w.relayBackendCpuPerEventMs),
    ]),
    panel('Resident memory', 'MiB', [line('RSS of this process', (w) => w.rssBytes / MiB)]),
    panel('Shared machine (2 cores)', 'processes / cores', [
      line('load average, 1 min', (w) => w.loadAverage),
      line('cores this process used', (w) => w.nodeCores),
    ]),
  ];
  // the partitioned layout: retention's work is the ranges dropped, not rows deleted
  if (windows.some((w) => w.ranges > 0))
    panels.push(
      panel('Ranges of the events table', 'ranges per window', [
        line('kept', (w) => w.ranges),
        line('made', (w) => w.rangesMade),
        line('dropped', (w) => w.rangesDropped),
      ]),
    );
  return chartGrid(panels, panels.length > 8 ? 3 : 4);
}
