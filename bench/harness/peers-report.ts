/**
 * The peers scenario's figures: a sample per system and round, their medians and ranges, and the report lines
 * (library / peer, the peers that lead, the cost per commit or per 100 events).
 */
import type { BenchContext } from './bench-scenario';
import { formatValue } from './report';
import type { StatementReading } from './statement-stats';
import { median } from './stats';
import { PEERS } from '../peers/peers';
import type { Peer } from '../peers/peer';

/** The systems of one line: the library, the peers, and the line's raw-SQL reference. */
export type System = 'library' | 'raw' | Peer['name'];

/** One system's figures in one round. */
export interface Sample {
  /** Commits/s or events/s. */
  rate: number;
  /** Server CPU per commit or event (µs), from /proc; NaN when unreadable. */
  serverCpuUs: number;
  /** Statements per commit or event, from pg_stat_statements; NaN when unavailable. */
  statements: number;
  /** The costliest statements of the round. */
  top: StatementReading['top'];
}

export interface Summary {
  median: number;
  min: number;
  max: number;
  serverCpuUs: number;
  statements: number;
  top: StatementReading['top'];
}

/** Medians and range over the rounds that produced a rate (a failed drain has none). */
export function summarizeSamples(all: readonly Sample[]): Summary {
  const samples = all.filter((s) => Number.isFinite(s.rate));
  const rates = samples.map((s) => s.rate);
  const middle = [...samples].sort((a, b) => a.rate - b.rate)[samples.length >> 1];
  return {
    median: median(rates),
    min: Math.min(...rates),
    max: Math.max(...rates),
    serverCpuUs: median(samples.map((s) => s.serverCpuUs)),
    statements: median(samples.map((s) => s.statements)),
    top: middle?.top ?? [],
  };
}

export function range(s: Summary, unit: string): string {
  return s.min === s.max
    ? formatValue(s.median, unit)
    : `${formatValue(s.min, '')}–${formatValue(s.max, unit)}`;
}

/** What a line's costs are given per: one commit, or 100 drained events (a batch of the library's). */
export interface Unit {
  name: string;
  /** Units of work per figure: 1 per commit, 100 per 100 events. */
  scale: number;
}

function costOf(system: System, s: Summary, unit: Unit): string {
  const cpu = Number.isNaN(s.serverCpuUs) ? 'n/a' : `${((s.serverCpuUs * unit.scale) / 1000).toFixed(2)} ms`;
  const statements = Number.isNaN(s.statements) ? 'n/a' : (s.statements * unit.scale).toFixed(1);
  return `${system} ${cpu} server CPU, ${statements} statements`;
}

function describeTop(system: System, s: Summary, unit: Unit): string | null {
  if (s.top.length === 0) return null;
  const parts = s.top.map(
    (c) =>
      `${(c.execMs * unit.scale).toFixed(3)} ms in ${(c.calls * unit.scale).toFixed(1)}× ` +
      c.query.replace(/\s+/g, ' ').slice(0, 60),
  );
  return `${system}, costliest statements per ${unit.name} (execution time): ${parts.join(' | ')}`;
}

/** `library vs <peer>` for every peer, higher is better; flags the peers that lead. */
export function reportRates(
  context: BenchContext,
  line: string,
  unit: string,
  summaries: Map<System, Summary>,
  goals: { peer?: System; target: number; againstBest?: boolean },
): void {
  const { report } = context;
  const library = summaries.get('library')!;
  const best = bestPeer(summaries);
  for (const name of PEERS.map((p) => p.name).filter((n) => summaries.has(n))) {
    const peer = summaries.get(name)!;
    const judged = goals.againstBest ? name === best : name === goals.peer;
    report.add({
      scenario: 'peers',
      label: `${line}: library vs ${name}`,
      value: library.median,
      unit,
      versus: { label: name, value: peer.median },
      goal: judged ? { on: 'ratio', op: '>=', target: goals.target } : undefined,
      note:
        `${peer.median > library.median ? `PEER LEADS: ${name} ${(peer.median / library.median).toFixed(2)}× the library; ` : ''}` +
        `rounds: library ${range(library, unit)}, ${name} ${range(peer, unit)}`,
    });
  }
}

export function reportCosts(
  context: BenchContext,
  summaries: Map<System, Summary>,
  unit: Unit,
  topOf: System[],
): void {
  const costs = [...summaries].map(([system, s]) => costOf(system, s, unit));
  context.report.note(`per ${unit.name}: ${costs.join('; ')}`);
  for (const system of topOf) {
    const text = describeTop(system, summaries.get(system)!, unit);
    if (text) context.report.note(text);
  }
}

/** The peer with the highest median. */
export function bestPeer(summaries: Map<System, Summary>): System {
  const peers = PEERS.map((p) => p.name).filter((name) => summaries.has(name));
  return peers.reduce((a, b) => (summaries.get(b)!.median > summaries.get(a)!.median ? b : a));
}
