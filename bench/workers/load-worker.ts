/**
 * One core's share of the peers scenario's background load: busy for `busyMs`, idle for `idleMs`, over and over,
 * until the bench disconnects. Started by `harness/background-load.ts` with the two figures as arguments.
 */
import { performance } from 'node:perf_hooks';

const [busyMs, idleMs] = process.argv.slice(2).map(Number);
if (!(busyMs! > 0) || !(idleMs! >= 0))
  throw new Error('load-worker runs as: load-worker.js <busyMs> <idleMs>');

let spins = 0;

function cycle(): void {
  const until = performance.now() + busyMs!;
  while (performance.now() < until) spins++;
  setTimeout(cycle, idleMs);
}

// The bench stopped it, or went away (crash, Ctrl-C): never outlive it.
process.on('disconnect', () => process.exit(spins >= 0 ? 0 : 1));
cycle();
