import { parseBenchOptions } from './bench-options';

describe('parseBenchOptions, soak flags', () => {
  it('leaves the soak out of a bare run and runs it when --only names it', () => {
    expect(parseBenchOptions([]).scenarios).not.toContain('soak');
    expect(parseBenchOptions(['--only=soak']).scenarios).toEqual(['soak']);
  });

  it('reads the rate, length, hold and output directory', () => {
    const { soak } = parseBenchOptions([
      '--only=soak',
      '--rate=250',
      '--minutes=12',
      '--hold=240',
      '--out=/tmp/x',
    ]);
    expect(soak).toEqual({ rate: 250, minutes: 12, holdSeconds: 240, outDir: '/tmp/x', activity: false });
  });

  it('defaults to 400 events/s, no hold, and the size’s length', () => {
    const options = parseBenchOptions(['--quick', '--only=soak']);
    expect(options.soak).toEqual({
      rate: 400,
      minutes: null,
      holdSeconds: 0,
      outDir: 'bench-output',
      activity: false,
    });
    expect(parseBenchOptions(['--only=soak', '--activity']).soak.activity).toBe(true);
    expect(options.sizes.soakMinutes).toBe(2);
  });

  it('names the flag and the value it refuses', () => {
    expect(() => parseBenchOptions(['--rate=fast'])).toThrow(
      '--rate must be events per second above 0, got "fast"',
    );
    expect(() => parseBenchOptions(['--minutes=0'])).toThrow('--minutes must be a number of minutes above 0');
    expect(() => parseBenchOptions(['--hold='])).toThrow(
      '--hold must be a number of seconds above 0, got ""',
    );
  });

  it('refuses a hold as long as the run', () => {
    expect(() => parseBenchOptions(['--quick', '--hold=120'])).toThrow(
      "--hold=120 must be shorter than the soak's 2 minutes (120 s)",
    );
    expect(parseBenchOptions(['--quick', '--minutes=3', '--hold=120']).soak.holdSeconds).toBe(120);
  });
});

describe('parseBenchOptions, peers lines', () => {
  it('runs every peers line unless --lines names some, in their fixed order', () => {
    expect(parseBenchOptions([]).peersLines).toEqual(['enqueue', 'drains', 'latency', 'delayed']);
    expect(parseBenchOptions(['--lines=delayed,enqueue']).peersLines).toEqual(['enqueue', 'delayed']);
  });

  it('names the line it does not know', () => {
    expect(() => parseBenchOptions(['--lines=delay'])).toThrow('unknown peers line delay');
    expect(() => parseBenchOptions(['--lines='])).toThrow('unknown peers line (none named)');
  });
});

describe('parseBenchOptions, the layout', () => {
  it('runs on the migrations’ tables unless --layout=partitioned', () => {
    expect(parseBenchOptions(['--only=soak']).layout).toBe('unpartitioned');
    expect(parseBenchOptions(['--only=soak', '--layout=partitioned']).layout).toBe('partitioned');
    expect(() => parseBenchOptions(['--layout=sharded'])).toThrow('unknown argument "--layout=sharded"');
  });

  it('takes --range-minutes (bench only) with the partitioned layout, in whole minutes below an hour', () => {
    expect(parseBenchOptions(['--layout=partitioned']).rangeMinutes).toBeNull();
    expect(parseBenchOptions(['--layout=partitioned', '--range-minutes=1']).rangeMinutes).toBe(1);
    expect(() => parseBenchOptions(['--range-minutes=2'])).toThrow(
      '--range-minutes=2 needs --layout=partitioned',
    );
    expect(() => parseBenchOptions(['--layout=partitioned', '--range-minutes=60'])).toThrow(
      'whole number of minutes from 1 to 59',
    );
    expect(() => parseBenchOptions(['--layout=partitioned', '--range-minutes=1.5'])).toThrow(
      'whole number of minutes from 1 to 59',
    );
  });

  it('adds a 10 million event history to the full scale scenario only', () => {
    expect(parseBenchOptions([]).sizes.scaleHistories).toEqual([10_000, 1_000_000, 10_000_000]);
    expect(parseBenchOptions(['--quick']).sizes.scaleHistories).toEqual([10_000, 100_000]);
  });
});
