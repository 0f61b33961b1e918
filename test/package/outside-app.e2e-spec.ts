import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createEmptyDatabase, type TestDatabase } from '../support/test-database';
import { documentedExports, exportsCheckSource, quickStartFiles } from './documented-exports';

/**
 * Packs the library and runs a fresh Nest app outside this repository against the tarball: its own package.json
 * and node_modules (installed from the npm registry, npm's cache makes it quick), `tsc --strict` with
 * `skipLibCheck: false`, no path aliases, once per supported stack and module system.
 */
const ROOT = join(__dirname, '..', '..');
const TEMPLATE = join(__dirname, 'outside-app');
const QUICK_START_MAIN = join(__dirname, 'quick-start', 'main.ts');

const STACKS = {
  'Nest 12 + TypeORM 1': {
    '@nestjs/common': '12.5.1',
    '@nestjs/core': '12.5.1',
    '@nestjs/schedule': '12.0.2',
    '@nestjs/typeorm': '12.0.2',
    '@nestjs/platform-express': '12.5.1',
    typeorm: '1.1.1',
  },
  'Nest 11 + TypeORM 0.3': {
    '@nestjs/common': '11.2.10',
    '@nestjs/core': '11.2.10',
    '@nestjs/schedule': '6.1.3',
    '@nestjs/typeorm': '11.0.3',
    '@nestjs/platform-express': '11.2.10',
    typeorm: '0.3.31',
  },
} as const;
const COMMON = { pg: '8.23.1', 'reflect-metadata': '0.2.2', rxjs: '7.8.2' };
const DEV = { typescript: '6.0.3', '@types/node': '20.19.43', '@types/pg': '8.23.1' };

/** The environment of a user's shell: none of this repository's npm or node settings leak into the app. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(npm_|NODE_OPTIONS$|NODE_PATH$|INIT_CWD$|OUTBOX_|DATABASE_URL$|JEST)/i.test(key)) env[key] = value;
  }
  return { ...env, ...extra };
}

function run(
  command: string,
  args: string[],
  cwd: string,
  env = userEnv(),
  timeoutMs = 180_000,
): SpawnSyncReturns<string> {
  const started = Date.now();
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: timeoutMs });
  if (process.env.OUTBOX_TEST_LOGS)
    process.stderr.write(`${command} ${args.join(' ')}: ${Date.now() - started} ms\n`);
  return result;
}

function ok(result: SpawnSyncReturns<string>, what: string): string {
  if (result.status !== 0) {
    throw new Error(
      `${what} failed (exit ${result.status}${result.signal ? `, ${result.signal}` : ''}):\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

describe('the packed library in a Nest app outside this repository', () => {
  let tarball: string;
  const folders: string[] = [];
  const databases: TestDatabase[] = [];

  beforeAll(() => {
    const output = execFileSync('npm', ['run', '--silent', 'pack:lib'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: userEnv(),
    });
    tarball = output.trim().split('\n').at(-1)!;
    expect(tarball).toMatch(/nestjs-pg-outbox-0\.1\.0\.tgz$/);
  }, 120_000);

  afterAll(async () => {
    for (const db of databases) await db.drop();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('holds only what the package\'s "files" names: the build, the SQL files, README, CHANGELOG, LICENSE', () => {
    const listed = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
    const outside = listed.filter(
      (path) =>
        !/^package\/(dist\/.*\.(js|d\.ts)|dist\/board\/assets\/[a-z-]+\.(css|js|svg)|sql\/\d{4}-[a-z0-9-]+\.(up|down)\.sql|README\.md|CHANGELOG\.md|LICENSE|package\.json)$/.test(
          path,
        ),
    );
    expect(outside).toEqual([]);
    expect(listed.filter((path) => /\.spec\.|\/src\//.test(path))).toEqual([]);
    expect(listed).toEqual(
      expect.arrayContaining([
        'package/dist/index.js',
        'package/dist/index.d.ts',
        'package/dist/cli/outbox-cli.js',
        'package/dist/testing/index.js',
        'package/dist/testing/index.d.ts',
        'package/dist/board/assets/board.css',
        'package/dist/board/assets/board.js',
      ]),
    );
  });

  const cases = Object.keys(STACKS).flatMap((stack) =>
    (['commonjs', 'module'] as const).map((type) => ({ stack: stack as keyof typeof STACKS, type })),
  );

  it.each(cases)(
    '$stack, "type": "$type": installs, compiles strictly, migrates, delivers a commit and nothing of a rollback, closes',
    async ({ stack, type }) => {
      const app = mkdtempSync(join(tmpdir(), 'outbox-outside-app-'));
      folders.push(app);
      // CommonJS: the README's quick start, pasted as it is written (it migrates with the TypeORM classes).
      // ES modules: an app of the same shape with `.js` import paths, migrated with `npx nestjs-pg-outbox sql`.
      const readme = type === 'commonjs';
      if (readme) {
        const files = quickStartFiles();
        expect([...files.keys()]).toEqual(expect.arrayContaining(['app.module.ts']));
        for (const [path, source] of files) {
          mkdirSync(dirname(join(app, 'src', path)), { recursive: true });
          writeFileSync(join(app, 'src', path), source);
        }
        cpSync(QUICK_START_MAIN, join(app, 'src', 'main.ts'));
      } else {
        cpSync(join(TEMPLATE, 'src'), join(app, 'src'), { recursive: true });
      }
      const names = documentedExports();
      expect(names.get('nestjs-pg-outbox')).toEqual(
        expect.arrayContaining(['OnOutboxEvent', 'OutboxModule', 'OutboxService', 'OutboxEventMap']),
      );
      expect(names.get('nestjs-pg-outbox/testing')).toEqual(['OutboxTestKit', 'OutboxTestKitError']);
      writeFileSync(join(app, 'src', 'exports-check.ts'), exportsCheckSource(names));
      writeFileSync(
        join(app, 'package.json'),
        JSON.stringify(
          {
            name: 'outside-app',
            private: true,
            type,
            dependencies: { 'nestjs-pg-outbox': `file:${tarball}`, ...STACKS[stack], ...COMMON },
            devDependencies: DEV,
          },
          null,
          2,
        ),
      );
      writeFileSync(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            // A CommonJS app needs nodenext to compile against Nest 12's ES modules (node16 refuses: TS1479).
            module: 'nodenext',
            moduleResolution: 'nodenext',
            strict: true,
            skipLibCheck: false,
            experimentalDecorators: true,
            emitDecoratorMetadata: true,
            esModuleInterop: true,
            types: ['node'],
            rootDir: 'src',
            outDir: 'dist',
          },
          include: ['src'],
        }),
      );

      ok(
        run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], app),
        'npm install',
      );
      ok(
        run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], app),
        'tsc',
      );

      const db = await createEmptyDatabase();
      databases.push(db);
      const migrate = readme ? 'classes' : 'sql';
      if (migrate === 'sql') {
        const sql = ok(
          run(join(app, 'node_modules', '.bin', 'nestjs-pg-outbox'), ['sql'], app),
          'npx nestjs-pg-outbox sql',
        );
        await db.sql(sql);
      }

      const [observer] = await db.sql<{ pid: number }>('select pg_backend_pid() as pid');
      const started = run(
        process.execPath,
        [join(app, 'dist', 'main.js')],
        app,
        userEnv({ DATABASE_URL: db.url, MIGRATE: migrate, OBSERVER_PID: String(observer.pid) }),
        60_000,
      );
      if (started.signal)
        throw new Error(`the app did not exit on its own after app.close(): ${started.stderr}`);
      const line = ok(started, 'the app')
        .split('\n')
        .find((l) => l.startsWith('RESULT '));
      const result = JSON.parse(line!.slice('RESULT '.length));
      expect(result.rolledBack).toBe('rolled back on purpose');
      expect(result.summaries).toEqual([readme ? 'Contact Ada created' : 'created Ada']);
      expect(result.events).toEqual({ all: 1, published: 1 });
      expect(result.contacts).toBe(1);
      expect(result.openConnections).toBe(0);
      // the ES-module app also boots with brokers whose clients it never installed: boot names each package
      if (!readme)
        expect(result.missingPeers).toEqual([
          expect.stringContaining(
            'brokers[0] ("rabbit") (type \'rabbitmq\') needs the package amqplib, which is not installed: npm install amqplib',
          ),
          expect.stringContaining('npm install @nats-io/transport-node'),
          expect.stringContaining('npm install @nats-io/jetstream'),
        ]);
    },
    300_000,
  );
});
