import { loadedInChild } from './support/loaded-in-child';
import { createTestDatabase, type TestDatabase } from './support/test-database';

const FEATURES = ['webhooks', 'brokers', 'inbox', 'admin', 'board', 'observability', 'testing'];

/** The feature files and feature packages that test/support/core-only-child.ts loaded, each with its import chain. */
function loadedFeatures(db: TestDatabase, alsoImport: string[] = []): string[] {
  return loadedInChild('core-only-child.ts', { DATABASE_URL: db.url, ALSO_IMPORT: alsoImport.join(',') });
}

describe("the package's entries", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('an app that imports only the core boots, enqueues and closes without loading a feature file or package', () => {
    expect(loadedFeatures(db)).toEqual([]);
  });

  it('the check sees each feature entry the app imports (so it can fail)', () => {
    const loaded = loadedFeatures(db, FEATURES);
    for (const feature of FEATURES)
      expect(loaded.filter((chain) => chain.startsWith(`libs/outbox/src/${feature}/index.ts <- `))).toEqual([
        `libs/outbox/src/${feature}/index.ts <- test/support/core-only-child.ts`,
      ]);
  });
});
