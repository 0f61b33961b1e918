import {
  FAULT_SEED_ENV,
  FaultRandom,
  faultRandom,
  faultRandomFromEnv,
  mulberry32,
  parseFaultSeed,
} from './fault-random';

const draws = (random: FaultRandom, n: number, count: number): number[] =>
  Array.from({ length: count }, () => random.int(n));

describe('mulberry32', () => {
  it('yields the outputs of the reference implementation', () => {
    const next = mulberry32(1985);
    expect([next(), next()]).toEqual([3527837133, 3112574143]);
  });

  it('wraps its state at 32 bits, so a seed and the same seed plus 2^32 agree', () => {
    const a = mulberry32(7);
    const b = mulberry32(7 + 2 ** 32);
    expect(Array.from({ length: 5 }, a)).toEqual(Array.from({ length: 5 }, b));
  });
});

describe('FaultRandom', () => {
  it('makes the same choices again from the same seed, and others from another seed', () => {
    expect(draws(new FaultRandom(123), 1000, 20)).toEqual(draws(new FaultRandom(123), 1000, 20));
    expect(draws(new FaultRandom(124), 1000, 20)).not.toEqual(draws(new FaultRandom(123), 1000, 20));
  });

  it('draws every whole number in [0, n) and nothing outside it', () => {
    const seen = new Set(draws(new FaultRandom(9), 3, 300));
    expect([...seen].sort()).toEqual([0, 1, 2]);
  });

  it('keys a concurrent choice by seed and key only, not by what was drawn before', () => {
    const random = new FaultRandom(77);
    const first = random.intFor('event-5:1', 60);
    draws(random, 100, 50);
    expect(random.intFor('event-5:1', 60)).toBe(first);
    expect(new FaultRandom(77).intFor('event-5:1', 60)).toBe(first);
    const keys = Array.from({ length: 50 }, (_, i) => `event-${i}:1`);
    const bySeed = (seed: number): number[] => keys.map((key) => new FaultRandom(seed).intFor(key, 60));
    expect(bySeed(78)).not.toEqual(bySeed(77));
  });

  it('spreads keyed choices evenly, so a scenario’s fault rates hold', () => {
    const random = new FaultRandom(2026);
    const rolls = Array.from({ length: 20_000 }, (_, n) => random.intFor(`${n}:1:fx-writer`, 40));
    const throwing = rolls.filter((roll) => roll < 4).length / rolls.length; // the flaky consumers' 1 in 10
    expect(throwing).toBeGreaterThan(0.09);
    expect(throwing).toBeLessThan(0.11);
  });
});

describe('parseFaultSeed', () => {
  it('reads a whole number from 0 to 2^32 - 1, and nothing when unset', () => {
    expect(parseFaultSeed(undefined)).toBeUndefined();
    expect(parseFaultSeed('')).toBeUndefined();
    expect(parseFaultSeed('0')).toBe(0);
    expect(parseFaultSeed(' 42 ')).toBe(42);
    expect(parseFaultSeed('4294967295')).toBe(4294967295);
  });

  it('refuses anything else, naming the variable and what it takes', () => {
    for (const text of ['4294967296', '-1', '1.5', '1e3', '0x10', 'abc']) {
      expect(() => parseFaultSeed(text)).toThrow(`${FAULT_SEED_ENV}=${JSON.stringify(text)} is not a seed`);
    }
    expect(() => parseFaultSeed('abc')).toThrow(/whole number from 0 to 4294967295/);
  });
});

describe('faultRandom', () => {
  let printed: string[];
  beforeEach(() => {
    printed = [];
    jest.spyOn(console, 'log').mockImplementation((line: string) => void printed.push(line));
  });
  afterEach(() => jest.restoreAllMocks());

  it('takes the seed from OUTBOX_FAULT_SEED and prints how to replay the spec', () => {
    const random = faultRandom(`${process.cwd()}/test/faults/x.fault-spec.ts`, { [FAULT_SEED_ENV]: '31337' });
    expect(random.seed).toBe(31337);
    expect(printed).toEqual([
      `[faults] test/faults/x.fault-spec.ts: ${FAULT_SEED_ENV}=31337 ` +
        `(replay: ${FAULT_SEED_ENV}=31337 npx jest -c jest.faults.config.js test/faults/x.fault-spec.ts)`,
    ]);
  });

  it('picks and prints a fresh seed when none is set, which replays the same choices', () => {
    const random = faultRandom(`${process.cwd()}/test/faults/x.fault-spec.ts`, {});
    expect(printed[0]).toContain(`${FAULT_SEED_ENV}=${random.seed} `);
    const replayed = faultRandom(`${process.cwd()}/test/faults/x.fault-spec.ts`, random.env());
    expect(draws(replayed, 1000, 10)).toEqual(draws(random, 1000, 10));
  });
});

describe('faultRandomFromEnv', () => {
  it('gives a child process the choices of its spec', () => {
    const spec = new FaultRandom(555);
    expect(faultRandomFromEnv(spec.env()).intFor('7:2', 60)).toBe(spec.intFor('7:2', 60));
  });

  it('refuses to start a child without its spec’s seed', () => {
    expect(() => faultRandomFromEnv({})).toThrow(`${FAULT_SEED_ENV} is not set`);
  });
});
