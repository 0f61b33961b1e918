/**
 * The peers scenario's figures: a sample per system and round, their medians and ranges, and the report lines
 * (library / peer, the peers that lead, CPU per unit of work as Node + PostgreSQL, statements per unit).
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
  /** Node CPU per commit or event (µs): the process(es) doing the system's work, user + system. */
  nodeCpuUs: number;
  /** PostgreSQL CPU per commit or event (µs): its backends, from /proc; NaN when unreadable. */
  serverCpuUs: number;
  /** Statements per commit or event, from pg_stat_statements; NaN when unavailable. */
  statements: number;
  /** The costliest statements of the round. */
  top: StatementReading['top'];
}

/** CPU per unit of the round whose total is the median (so that its two parts add up), and the totals' range. */
export interface CpuSummary {
  nodeUs: number;
  serverUs: number;
  totalUs: number;
  minUs: number;
  maxUs: number;
}

export interface Summary {
  median: number;
  min: number;
  max: number;
  cpu: CpuSummary;
  statements: number;
  top: StatementReading['top'];
}

const NO_CPU: CpuSummary = { nodeUs: NaN, serverUs: NaN, totalUs: NaN, minUs: NaN, maxUs: NaN };

function summarizeCpu(samples: readonly Sample[]): CpuSummary {
  const totals = samples
    .map((s) => ({ node: s.nodeCpuUs, server: s.serverCpuUs, total: s.nodeCpuUs + s.serverCpuUs }))
    .filter((c) => Number.isFinite(c.total))
    .sort((a, b) => a.total - b.total);
  const middle = totals[(totals.length - 1) >> 1];
  if (!middle) return NO_CPU;
  return {
    nodeUs: middle.node,
    serverUs: middle.server,
    totalUs: middle.total,
    minUs: totals[0]!.total,
    maxUs: totals[totals.length - 1]!.total,
  };
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
    cpu: summarizeCpu(samples),
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

function statementsOf(system: System, s: Summary, unit: Unit): string {
  return `${system} ${Number.isNaN(s.statements) ? 'n/a' : (s.statements * unit.scale).toFixed(1)}`;
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

/** Statements per unit for every system, and the costliest statements of `topOf`. */
export function reportStatements(
  context: BenchContext,
  summaries: Map<System, Summary>,
  unit: Unit,
  topOf: System[],
): void {
  const counts = [...summaries].map(([system, s]) => statementsOf(system, s, unit));
  context.report.note(`statements per ${unit.name}: ${counts.join('; ')}`);
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

/**
 * How a line's CPU is given: per commit in µs, per 1,000 events in ms, per event in µs. A sample holds µs per
 * commit or event, so µs per event and ms per 1,000 events are the same number.
 */
export interface CpuUnit {
  /** `µs per commit`, `ms per 1,000 events`, `µs per event`. */
  per: string;
  unit: 'µs' | 'ms';
}

/** A CPU comparison: the library's CPU per unit against `versus`'s, at most `target` × it when given. */
export interface CpuGoal {
  versus: System;
  target?: number;
}

function cpuText(system: System, c: CpuSummary): string {
  if (!Number.isFinite(c.totalUs)) return `${system} n/a`;
  const figure = (us: number): string => formatValue(us, '');
  const spread = c.minUs === c.maxUs ? '' : ` (rounds ${figure(c.minUs)}–${figure(c.maxUs)})`;
  return `${system} ${figure(c.nodeUs)} + ${figure(c.serverUs)} = ${figure(c.totalUs)}${spread}`;
}

/**
 * `<work>: CPU <per>, Node + PostgreSQL: raw 94 + 177 = 271; library …` for every system of the line, then one
 * figure per goal: the library's total against the other system's.
 */
export function reportCpu(
  context: BenchContext,
  work: string,
  summaries: Map<System, Summary>,
  unit: CpuUnit,
  goals: readonly CpuGoal[],
): void {
  const { report } = context;
  const systems = [...summaries].map(([system, s]) => cpuText(system, s.cpu));
  report.note(`${work}: CPU ${unit.per}, Node + PostgreSQL: ${systems.join('; ')}`);
  const library = summaries.get('library')!.cpu;
  for (const goal of goals) {
    const other = summaries.get(goal.versus)!.cpu;
    report.add({
      scenario: 'peers',
      label: `${work}: CPU ${unit.per}, library vs ${goal.versus}`,
      value: library.totalUs,
      unit: unit.unit,
      versus: { label: goal.versus, value: other.totalUs },
      goal: goal.target === undefined ? undefined : { on: 'ratio', op: '<=', target: goal.target },
      note: `Node + PostgreSQL: ${cpuText('library', library)}; ${cpuText(goal.versus, other)}`,
    });
  }
}
