import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import {
  cpSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createEmptyDatabase, type TestDatabase } from '../support/test-database';
import { documentedExports, exportsCheckSource, quickStartFiles } from './documented-exports';

/**
 * Packs the library and runs a fresh Nest app outside this repository against the tarball: its own package.json
 * and node_modules (installed from the npm registry, npm's cache makes it quick), `tsc --strict` with
 * `skipLibCheck: false`, no path aliases, once per supported stack and module system. The install is the stack's,
 * whatever the module system ("type" changes nothing npm installs): made once per stack, each app of that stack gets
 * its files as hard links in a node_modules folder of its own.
 */
const ROOT = join(__dirname, '..', '..');
const TEMPLATE = join(__dirname, 'outside-app');
const QUICK_START_MAIN = join(__dirname, 'quick-start', 'main.ts');
/** Scripts copied into every app: one imports every entry, one imports only the core. */
const ENTRY_SCRIPTS = join(__dirname, 'entries');
const FEATURES = ['webhooks', 'brokers', 'inbox', 'admin', 'board', 'observability', 'testing'];
/** The main export of each feature entry, which the docs must document. */
const MAIN = {
  'nestjs-pg-outbox/webhooks': 'OutboxWebhooksModule',
  'nestjs-pg-outbox/brokers': 'OutboxBrokersModule',
  'nestjs-pg-outbox/inbox': 'OutboxInboxModule',
  'nestjs-pg-outbox/admin': 'OutboxAdminModule',
  'nestjs-pg-outbox/board': 'OutboxBoardModule',
  'nestjs-pg-outbox/observability': 'OutboxMetricsModule',
  'nestjs-pg-outbox/testing': 'OutboxTestKit',
} as const;

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

/** Recreates the tree `from` at `to`: folders made, files hard-linked, symbolic links copied as links. */
function linkTree(from: string, to: string): void {
  mkdirSync(to);
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const [source, target] = [join(from, entry.name), join(to, entry.name)];
    if (entry.isDirectory()) linkTree(source, target);
    else if (entry.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else linkSync(source, target);
  }
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
    const { version } = JSON.parse(readFileSync(join(ROOT, 'libs', 'outbox', 'package.json'), 'utf8'));
    expect(tarball.endsWith(`/nestjs-pg-outbox-${version}.tgz`)).toBe(true);
  }, 120_000);

  /** Each stack's install (its folder, holding node_modules), made by the first app of the stack. */
  const installs = new Map<keyof typeof STACKS, string>();
  function install(stack: keyof typeof STACKS): string {
    let folder = installs.get(stack);
    if (!folder) {
      folder = mkdtempSync(join(tmpdir(), 'outbox-outside-install-'));
      folders.push(folder);
      writeFileSync(
        join(folder, 'package.json'),
        JSON.stringify({
          name: 'outside-app-install',
          private: true,
          dependencies: { 'nestjs-pg-outbox': `file:${tarball}`, ...STACKS[stack], ...COMMON },
          devDependencies: DEV,
        }),
      );
      ok(
        run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], folder),
        'npm install',
      );
      installs.set(stack, folder);
    }
    return folder;
  }

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
        ...FEATURES.flatMap((entry) => [
          `package/dist/${entry}/index.js`,
          `package/dist/${entry}/index.d.ts`,
        ]),
        'package/dist/board/assets/board.css',
        'package/dist/board/assets/board.js',
      ]),
    );
  });

  const cases = Object.keys(STACKS).flatMap((stack) =>
    (['commonjs', 'module'] as const).map((type) => ({ stack: stack as keyof typeof STACKS, type })),
  );

  it.each(cases)(
    '$stack, "type": "$type": installs, compiles strictly, migrates, delivers a commit and nothing of a rollback, closes; boots every entry; the core alone loads no feature',
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
      cpSync(ENTRY_SCRIPTS, join(app, 'src'), { recursive: true });
      const names = documentedExports();
      expect(names.get('nestjs-pg-outbox')).toEqual(
        expect.arrayContaining(['OnOutboxEvent', 'OutboxModule', 'OutboxService', 'OutboxEventMap']),
      );
      // each feature entry is documented, its main export imported or named in the docs
      for (const [entry, main] of Object.entries(MAIN))
        expect({ entry, documented: names.get(entry as keyof typeof MAIN)?.includes(main) }).toEqual({
          entry,
          documented: true,
        });
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

      linkTree(join(install(stack), 'node_modules'), join(app, 'node_modules'));
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
      /** Runs a compiled script of the app; returns the JSON it prints after `<prefix> `. */
      const script = (
        name: string,
        prefix: string,
        env: Record<string, string> = {},
      ): Record<string, unknown> => {
        const started = run(
          process.execPath,
          [join(app, 'dist', name)],
          app,
          userEnv({ DATABASE_URL: db.url, ...env }),
          60_000,
        );
        if (started.signal)
          throw new Error(`${name} did not exit on its own after app.close(): ${started.stderr}`);
        const line = ok(started, name)
          .split('\n')
          .find((l) => l.startsWith(`${prefix} `));
        if (!line)
          throw new Error(`${name} printed no ${prefix} line:\n${started.stdout}\n${started.stderr}`);
        return JSON.parse(line.slice(prefix.length + 1));
      };
      const result = script('main.js', 'RESULT', { MIGRATE: migrate, OBSERVER_PID: String(observer.pid) });
      expect(result.rolledBack).toBe('rolled back on purpose');
      expect(result.summaries).toEqual([readme ? 'Contact Ada created' : 'created Ada']);
      expect(result.events).toEqual({ all: 1, published: 1 });
      expect(result.contacts).toBe(1);
      expect(result.openConnections).toBe(0);
      // every entry, imported by its subpath: each feature module boots beside the core; brokers of each type and
      // the observability modules fail boot naming the packages this app did not install
      const every = script('every-entry.js', 'RESULT');
      expect(every.booted).toEqual({
        service: true,
        webhookSubscriptions: true,
        inbox: true,
        testKit: true,
        webhookSecret: 'string',
        brokerErrorCodes: 'object',
      });
      expect(every.healthStatus).toBe('up');
      expect(every.brokerProblems).toEqual([
        expect.stringContaining(
          'brokers[0] ("rabbit") (type \'rabbitmq\') needs the package amqplib, which is not installed: npm install amqplib',
        ),
        expect.stringContaining('npm install @nats-io/transport-node'),
        expect.stringContaining('npm install @nats-io/jetstream'),
      ]);
      expect(every.metricsProblems).toEqual([expect.stringContaining('npm install prom-client')]);
      expect(every.tracingProblems).toEqual([expect.stringContaining('npm install @opentelemetry/api')]);

      // the core alone: the package's index is in the loader's cache, no feature file or feature package is
      const coreOnly = script('core-only.js', 'LOADED');
      expect(coreOnly).toEqual({ booted: true, outbox: 1, loaded: [] });
    },
    300_000,
  );
});
