import { createTestDatabase, type TestDatabase } from '../../support/test-database';
import { FAULT_EFFECTS_SQL } from './fault-consumers';
import { FaultFleet } from './fault-fleet';
import type { FaultRandom } from './fault-random';

/** A fault scenario's database (with the consumers' effects table) and its fleet of relay processes. */
export interface FaultFixture {
  db: TestDatabase;
  /**
   * Starts `count` relay processes with these environment variables (DATABASE_URL and the seed are added), of
   * `script` when given (default fault-relay-child.ts).
   */
  startFleet(count: number, env: Record<string, string>, script?: string): Promise<FaultFleet>;
}

/**
 * Registers beforeAll/afterAll hooks that create the database and, at the end, kill the fleet and drop it.
 * The relay processes get the spec's seed, for the choices they make themselves.
 */
export function useFaultFixture(random: FaultRandom): FaultFixture {
  let fleet: FaultFleet | undefined;
  const fixture = {
    db: undefined as unknown as TestDatabase,
    startFleet: async (count: number, env: Record<string, string>, script?: string): Promise<FaultFleet> => {
      fleet = new FaultFleet({ DATABASE_URL: fixture.db.url, ...random.env(), ...env }, script);
      await fleet.start(count);
      return fleet;
    },
  };
  beforeAll(async () => {
    fixture.db = await createTestDatabase([FAULT_EFFECTS_SQL]);
  });
  afterAll(async () => {
    await fleet?.stopAll();
    await fixture.db?.drop();
  });
  return fixture;
}
