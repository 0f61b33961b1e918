import { loadedInChild } from '../support/loaded-in-child';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

/** The optional peers that test/support/optional-peers-child.ts loaded in the given mode. */
function loadedPeers(db: TestDatabase, mode: string): string[] {
  return loadedInChild('test/support/optional-peers-child.ts', {
    DATABASE_URL: db.url,
    OPTIONAL_PEERS: mode,
  });
}

describe('the optional peers (transactionHost, brokers)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('are not loaded by an app that does not use them', () => {
    expect(loadedPeers(db, 'none')).toEqual([]);
  });

  it('are loaded for brokers only when brokers of their type are configured', () => {
    expect(loadedPeers(db, 'brokers')).toEqual([
      '@nats-io/jetstream',
      '@nats-io/nats-core',
      '@nats-io/nkeys',
      '@nats-io/nuid',
      '@nats-io/transport-node',
      'amqplib',
    ]);
  });

  it('are loaded when the option is on (the check above can see them)', () => {
    expect(loadedPeers(db, 'cls')).toEqual([
      '@nestjs-cls/transactional',
      '@nestjs-cls/transactional-adapter-typeorm',
      'nestjs-cls',
    ]);
  });
});
