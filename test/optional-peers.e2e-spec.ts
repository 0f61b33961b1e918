import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { TYPESCRIPT_NODE_ARGS } from './support/child-relay';
import { createTestDatabase, type TestDatabase } from './support/test-database';

/** Runs the child app in a fresh process (jest's own module registry would hide what Node loaded). */
function loadedPeers(db: TestDatabase, mode: string): string[] {
  const result = spawnSync(
    process.execPath,
    [...TYPESCRIPT_NODE_ARGS, join(__dirname, 'support', 'optional-peers-child.ts')],
    {
      cwd: join(__dirname, '..'),
      env: { ...process.env, DATABASE_URL: db.url, OPTIONAL_PEERS: mode },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  const line = result.stdout.split('\n').find((l) => l.startsWith('LOADED '));
  if (result.status !== 0 || !line)
    throw new Error(`the child app failed:\n${result.stdout}\n${result.stderr}`);
  return JSON.parse(line.slice('LOADED '.length));
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
