import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxStore } from './outbox.store';
import { PgRelayStore } from './pg-relay-store';

const withPool = (options: { poolSize?: number; extra?: { max?: number } }): PgRelayStore =>
  new PgRelayStore(
    { dataSource: () => ({ options }) } as unknown as OutboxStore,
    {} as ResolvedOutboxOptions,
    { claimPositions: null, claimFloor: null, leaseProbesByKey: true },
  );

describe('PgRelayStore.poolSize', () => {
  it("reads the DataSource's pool: TypeORM passes extra.max over poolSize, pg's 10 when given none", () => {
    expect(withPool({}).poolSize()).toBe(10);
    expect(withPool({ poolSize: 8 }).poolSize()).toBe(8);
    expect(withPool({ poolSize: 20, extra: { max: 2 } }).poolSize()).toBe(2);
  });
});
