/**
 * The fault suite's random choices, all drawn from one seed per spec file. The seed is printed at the start
 * of the spec; `OUTBOX_FAULT_SEED=<seed> npm run test:faults` (or `npx jest -c jest.faults.config.js <spec>`)
 * makes the same choices again. Timing (the machine's load, the library's retry jitter) is not replayed.
 */
import { randomInt } from 'node:crypto';
import { relative } from 'node:path';

/** The environment variable that fixes the seed; relay child processes get it from their spec. */
export const FAULT_SEED_ENV = 'OUTBOX_FAULT_SEED';

const TWO_TO_32 = 2 ** 32;

/**
 * mulberry32 (Tommy Ettinger, 2017): a 32-bit state advanced by a Weyl sequence and mixed. Returns the
 * generator of its outputs, unsigned 32-bit integers; pure, so a seed always yields the same sequence.
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** FNV-1a over the UTF-16 code units of `text`: folds a choice's key into a 32-bit seed. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}

/** The seed in `text` (a whole number from 0 to 4294967295), undefined when unset; refuses anything else. */
export function parseFaultSeed(text: string | undefined): number | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const seed = Number(text.trim());
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(seed) || seed >= TWO_TO_32) {
    throw new Error(
      `${FAULT_SEED_ENV}=${JSON.stringify(text)} is not a seed: use a whole number from 0 to ${TWO_TO_32 - 1}, ` +
        'as a fault spec prints it at its start',
    );
  }
  return seed;
}

/** One spec's random choices, all from one seed. */
export class FaultRandom {
  private readonly next: () => number;

  constructor(readonly seed: number) {
    this.next = mulberry32(seed);
  }

  /** The next whole number in [0, n) of this spec's sequence: for choices made one after another. */
  int(n: number): number {
    return Math.floor((this.next() / TWO_TO_32) * n);
  }

  /**
   * A whole number in [0, n) that depends on the seed and `key` only, not on when it is asked for: for
   * choices made concurrently, such as per event and attempt in several relay processes.
   */
  intFor(key: string, n: number): number {
    return Math.floor((mulberry32(fnv1a(`${this.seed}:${key}`))() / TWO_TO_32) * n);
  }

  /** The environment that hands this seed to a child process (see {@link faultRandomFromEnv}). */
  env(): Record<string, string> {
    return { [FAULT_SEED_ENV]: String(this.seed) };
  }
}

/**
 * The random choices of the spec file `specFile` (pass `__filename`): from `OUTBOX_FAULT_SEED` when set,
 * else from a fresh seed. Prints the seed and the command that replays the spec.
 */
export function faultRandom(specFile: string, env: NodeJS.ProcessEnv = process.env): FaultRandom {
  const seed = parseFaultSeed(env[FAULT_SEED_ENV]) ?? randomInt(0, TWO_TO_32);
  const spec = relative(process.cwd(), specFile);

  console.log(
    `[faults] ${spec}: ${FAULT_SEED_ENV}=${seed} (replay: ${FAULT_SEED_ENV}=${seed} npx jest -c jest.faults.config.js ${spec})`,
  );
  return new FaultRandom(seed);
}

/** In a relay child process: the random choices of the spec that started it, which passed its seed on. */
export function faultRandomFromEnv(env: NodeJS.ProcessEnv = process.env): FaultRandom {
  const seed = parseFaultSeed(env[FAULT_SEED_ENV]);
  if (seed === undefined) {
    throw new Error(
      `${FAULT_SEED_ENV} is not set: the spec starts its relay children with FaultRandom.env()`,
    );
  }
  return new FaultRandom(seed);
}
