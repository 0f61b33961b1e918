import { loadedInChild } from '../support/loaded-in-child';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

const FEATURES = ['webhooks', 'brokers', 'inbox', 'admin', 'board', 'observability', 'testing'];
const SCRIPT = 'test/package/entries/core-only.ts';

/**
 * What test/package/entries/core-only.ts reports, run on the library's source: it boots an app that imports only
 * the core (and the `alsoImport` subpaths), closes, and lists the feature files and feature packages Node loaded,
 * each with its chain of imports. The outside-app test runs the same script against the packed package.
 */
function coreOnly(db: TestDatabase, alsoImport: string[] = []) {
  return loadedInChild<{ booted: boolean; outbox: number; loaded: string[] }>(SCRIPT, {
    DATABASE_URL: db.url,
    ALSO_IMPORT: alsoImport.join(','),
  });
}

describe("the package's entries", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('an app that imports only the core boots and closes without loading a feature file or feature package', () => {
    expect(coreOnly(db)).toEqual({ booted: true, outbox: 1, loaded: [] });
  });

  it('the check sees each feature entry the app imports (so it can fail)', () => {
    const { loaded } = coreOnly(db, FEATURES);
    for (const feature of FEATURES)
      expect(loaded.filter((chain) => chain.startsWith(`libs/outbox/src/${feature}/index.ts <- `))).toEqual([
        `libs/outbox/src/${feature}/index.ts <- ${SCRIPT}`,
      ]);
  });
});
