/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/enqueue-node-spread.ts`
 *
 * Why the peers scenario's "Node CPU per commit, library − raw" at one connection scatters by ±100 µs between
 * runs, and what reads it steadier. The peers scenario's enqueue work (a contact through TypeORM's manager, then
 * the event) for every system of that line — raw, the library, graphile-worker, pg-boss, pg-transactional-outbox
 * — all open at once in this process, taking turns in 250 ms slices (forward, then backward), Node CPU per
 * commit from `process.cpuUsage()` over each slice, as `bench/scenarios/peers/enqueue-lines.ts` measures it.
 * Rounds of TURNS turns, alternating two methods round by round:
 * - `bench`: the slices back to back, as the peers line takes them (each system's slice also pays for what the
 *   one before it left: its garbage, collected meanwhile, its timers);
 * - `settled`: before each slice SETTLE_MS (100) of the same system's work, not counted, so that every counted
 *   slice follows its own system's work (with GC=1 also a full collection first: V8's collector threads then
 *   go on into the counted slice, which `process.cpuUsage()` counts, and the readings rise by 300–500 µs).
 * Per round, library − raw, of the round's totals (as the peers line reads it) and of its slices' medians; per
 * method, their range and median over ROUNDS rounds; and each slice's Node CPU per commit by the system that ran
 * just before it (what a predecessor costs the next system's reading).
 */
import 'reflect-metadata';
import { loadavg } from 'node:os';
import {
  drive,
  libraryTransactor,
  peerTransactor,
  rawEventInsert,
  typeormTransactor,
  type Transactor,
} from '../harness/enqueue-transactors';
import { median } from '../harness/stats';
import { PEERS } from '../peers/peers';
import { exitWhenDone, heading, openDecisionDatabase, print } from './decision-server';

const SLICE_MS = 250;
const TURNS = Number(process.env.TURNS ?? 6);
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const SETTLE_MS = Number(process.env.SETTLE_MS ?? 100);
/** GC=1: `settled` also runs a full collection before each slice's settling work. */
const GC = process.env.GC === '1';
const METHODS = ['bench', 'settled'] as const;
type Method = (typeof METHODS)[number];

function collect(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function open(url: string): Promise<Map<string, Transactor>> {
  const systems = new Map<string, Transactor>();
  systems.set(
    'raw',
    await typeormTransactor(url, 1, 'spread-raw', async (manager) => {
      const insert = rawEventInsert();
      await manager.query(insert.text, insert.values);
    }),
  );
  systems.set(
    'library',
    await libraryTransactor(
      url,
      1,
      { side: 'library', business: true, withEvent: true },
      'spread-library',
      false,
    ),
  );
  if (process.env.NO_PEERS !== '1')
    for (const peer of PEERS)
      systems.set(peer.name, await peerTransactor(url, 1, peer, `spread-${peer.name}`));
  return systems;
}

interface Slice {
  system: string;
  after: string;
  us: number;
}

/** One round: TURNS turns over every system; Node µs per commit by system, and its slices. */
async function round(
  systems: Map<string, Transactor>,
  method: Method,
  parity: number,
): Promise<{ perCommit: Map<string, number>; slices: Slice[] }> {
  const names = [...systems.keys()];
  const totals = new Map(names.map((n) => [n, { us: 0, commits: 0 }]));
  const slices: Slice[] = [];
  let last = '-';
  for (let turn = 0; turn < TURNS; turn++) {
    const order = (turn + parity) % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      const transactor = systems.get(name)!;
      if (method === 'settled') {
        if (GC) collect();
        await drive(transactor, 1, SETTLE_MS);
      }
      const slice = await drive(transactor, 1, SLICE_MS);
      const total = totals.get(name)!;
      total.us += slice.cpuUs;
      total.commits += slice.commits;
      slices.push({ system: name, after: last, us: slice.cpuUs / slice.commits });
      last = name;
    }
  }
  return { perCommit: new Map([...totals].map(([n, t]) => [n, t.us / t.commits])), slices };
}

function signed(us: number): string {
  return `${us >= 0 ? '+' : ''}${us.toFixed(0)}`;
}

function spread(values: readonly number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  return `median ${median(sorted).toFixed(0)}, range ${sorted[0]!.toFixed(0)} to ${sorted[sorted.length - 1]!.toFixed(0)}`;
}

async function main(): Promise<void> {
  if (GC && typeof (globalThis as { gc?: unknown }).gc !== 'function')
    throw new Error('run with --expose-gc');
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(
      `Node CPU per enqueue commit, library − raw, 1 connection: ${ROUNDS} rounds per method of ${TURNS} turns`,
      serverVersion,
    );
    if (process.env.NO_PEERS !== '1') for (const peer of PEERS) await peer.install(db);
    const systems = await open(db.url);
    for (const transactor of systems.values()) await drive(transactor, 1, 300);
    const differences = new Map<Method, number[]>(METHODS.map((m) => [m, []]));
    const slices = new Map<Method, Slice[]>(METHODS.map((m) => [m, []]));
    const medianDifferences = new Map<Method, number[]>(METHODS.map((m) => [m, []]));
    for (let r = 0; r < ROUNDS * METHODS.length; r++) {
      // ABBA: bench, settled, settled, bench, …
      const method = METHODS[(r + (r >> 1)) % 2]!;
      const { perCommit, slices: taken } = await round(systems, method, r);
      const difference = perCommit.get('library')! - perCommit.get('raw')!;
      differences.get(method)!.push(difference);
      const sliceMedian = (system: string): number =>
        median(taken.filter((t) => t.system === system).map((t) => t.us));
      const ofMedians = sliceMedian('library') - sliceMedian('raw');
      medianDifferences.get(method)!.push(ofMedians);
      slices.get(method)!.push(...taken);
      print(
        `  round ${String(r + 1).padStart(2)} ${method.padEnd(7)} library ${perCommit.get('library')!.toFixed(0)}` +
          ` raw ${perCommit.get('raw')!.toFixed(0)} µs: ${signed(difference)}` +
          ` (of the slices' medians ${signed(ofMedians)})` +
          ` · load ${loadavg()[0]!.toFixed(1)}`,
      );
    }
    for (const method of METHODS) {
      print(`  ${method}: library − raw per round ${spread(differences.get(method)!)} µs`);
      print(`    of the slices' medians per round ${spread(medianDifferences.get(method)!)} µs`);
      for (const system of ['library', 'raw']) {
        const byAfter = new Map<string, number[]>();
        for (const s of slices.get(method)!)
          if (s.system === system) byAfter.set(s.after, [...(byAfter.get(s.after) ?? []), s.us]);
        print(
          `    ${system} slices by the system before: ` +
            [...byAfter]
              .map(([after, us]) => `after ${after} ${median(us).toFixed(0)} (${us.length})`)
              .join(', '),
        );
      }
    }
    for (const transactor of systems.values()) await transactor.close();
  } finally {
    await close();
  }
}

exitWhenDone(main());
