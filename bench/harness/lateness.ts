/**
 * Delayed delivery lateness: how long after its due instant each event's handler started, on one clock (the
 * wall clock of this process, which PostgreSQL on the same machine shares).
 */
import { performance } from 'node:perf_hooks';
import { percentile } from './stats';

/** `count` due instants (epoch ms) spread evenly from `start + fromMs` to `start + fromMs + spanMs`. */
export function dueInstants(start: number, count: number, fromMs: number, spanMs: number): number[] {
  const step = count > 1 ? spanMs / (count - 1) : 0;
  return Array.from({ length: count }, (_, i) => Math.round(start + fromMs + i * step));
}

/** A handler's start read on the monotonic clock (`performance.now()`), as epoch ms. */
export function epochOf(monotonicMs: number, timeOrigin = performance.timeOrigin): number {
  return timeOrigin + monotonicMs;
}

/** Handler start − due instant, in ms, of every event handled (epoch ms both); and how many never were. */
export function lateness(
  dueAt: ReadonlyMap<string, number>,
  handledAt: ReadonlyMap<string, number>,
): { lateMs: number[]; missing: number } {
  const lateMs: number[] = [];
  for (const [id, due] of dueAt) {
    const handled = handledAt.get(id);
    if (handled !== undefined) lateMs.push(handled - due);
  }
  return { lateMs, missing: dueAt.size - lateMs.length };
}

/** p50, p99 and the earliest (negative: an event handled before it was due). */
export function latenessFigures(lateMs: readonly number[]): { p50: number; p99: number; min: number } {
  return {
    p50: percentile(lateMs, 50),
    p99: percentile(lateMs, 99),
    min: lateMs.length === 0 ? Number.NaN : Math.min(...lateMs),
  };
}
