import { findFreePort, isAlive, isZombie } from './processes';

describe('isZombie', () => {
  it('reads the state after the command in /proc/<pid>/stat, whatever the command is called', () => {
    expect(isZombie('4242 (postgres) Z 1 4242 4242 0 -1')).toBe(true);
    expect(isZombie('4242 (post gres (x)) Z 1 4242')).toBe(true);
    expect(isZombie('4242 (post\ngres) Z 1 4242')).toBe(true);
    expect(isZombie('4242 (postgres) S 1 4242 4242 0 -1')).toBe(false);
    expect(isZombie('4242 (Z) S 1')).toBe(false);
  });
});

describe('isAlive', () => {
  it('is true for this process and false for a PID no process has', () => {
    expect(isAlive(process.pid)).toBe(true);
    expect(isAlive(2 ** 22 + 1)).toBe(false); // above Linux's pid_max
  });
});

describe('findFreePort', () => {
  it('picks a TCP port that is free on loopback', async () => {
    const port = await findFreePort();
    expect(port).toBeGreaterThan(0);
    expect(port).toBeLessThan(65536);
  });
});
