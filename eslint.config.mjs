// `npm run lint`. Prettier decides the layout (`npm run format:check`), so no rule here is about layout: a
// file that prettier accepts never fails for how it looks. Type-aware rules read the same tsconfig files as
// `npm run typecheck`.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const STORE_ONLY =
  'the outbox talks to pg and to TypeORM’s driver only in libs/outbox/src/store/: add a function there and call it';

// `pg`, `pg/…` and `typeorm/…` as an esquery regex (`\u002F` is `/`, which would end the regex).
const PG_OR_TYPEORM_INTERNALS = '/^(pg(\\u002F|$)|typeorm\\u002F)/';

// Each folder of the core, with the folders it may import (lowest first).
const CORE_FLOORS = {
  errors: [],
  model: ['errors'],
  options: ['model', 'errors'],
  extension: ['model', 'errors'],
  store: ['options', 'model', 'errors'],
  events: ['options', 'model', 'errors'],
  cls: ['store', 'options', 'model', 'errors'],
  maintenance: ['store', 'migrations', 'options', 'model', 'errors'],
  enqueue: ['cls', 'events', 'store', 'extension', 'options', 'model', 'errors'],
  consumers: ['cls', 'events', 'store', 'extension', 'options', 'model', 'errors'],
  batch: ['maintenance', 'store', 'extension', 'options', 'model', 'errors'],
  relay: ['batch', 'consumers', 'enqueue', 'maintenance', 'store', 'extension', 'options', 'model', 'errors'],
  migrations: ['model', 'errors'],
  cli: ['maintenance', 'store', 'migrations', 'model', 'errors'],
};
const FEATURES = ['webhooks', 'brokers', 'inbox', 'admin', 'board', 'observability', 'testing'];

export default defineConfig([
  globalIgnores([
    '**/node_modules/',
    '**/dist/',
    'coverage/',
    '.data/',
    '.scratch/',
    'test-output/',
    'test/types/docs/samples/',
  ]),
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },

  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'import-x/first': 'error',
      // An unused parameter or destructured element named `_x` is deliberate (a callback's signature, a skipped
      // column).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      // The code marks an element it knows is there with `!` (`rows[0]!`), as `noUncheckedIndexedAccess` would
      // require; without that compiler flag this rule calls every such mark unnecessary.
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // `async` on a function that does not await keeps its throw a rejection: the stubs and fakes that
      // implement an async interface (a tenant source, a transport, a query runner) are written that way.
      '@typescript-eslint/require-await': 'off',
      // `interface OutboxEventMap extends OutboxEventMapOf<typeof events> {}` is how an app declares its events.
      '@typescript-eslint/no-empty-object-type': ['error', { allowInterfaces: 'with-single-extends' }],
    },
  },

  {
    // Tests, the benchmark and the tools take `any` from jest's asymmetric matchers (`expect.any(String)`),
    // TypeORM's `query()` and `JSON.parse` of what they read back: typing each would be a cast that checks
    // nothing. The library and the demo app keep these rules.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'tools/**/*.ts', '**/*.spec.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },

  {
    // The outside app and the quick start are compiled in a fresh app of their own (test/package/*.e2e-spec.ts),
    // not by this workspace's tsconfig: linted without type information. The decorator flags tell
    // `consistent-type-imports` that an injected constructor parameter's class is a value (decorator metadata).
    files: ['test/package/outside-app/**/*.ts', 'test/package/quick-start/**/*.ts'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      parserOptions: { projectService: false, experimentalDecorators: true, emitDecoratorMetadata: true },
    },
  },

  {
    // No import cycle between the library's files (type-only imports are skipped here; the folder-level check,
    // type imports included, is tools/folder-cycles.spec.ts).
    files: ['libs/outbox/src/**/*.ts'],
    settings: {
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'] })],
      'import-x/extensions': ['.ts'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },

  {
    // The core's floors (docs/architecture.md): a folder imports only the folders below it. The features (webhooks,
    // brokers, inbox, admin, board, observability, testing) sit above the core, which imports none of them; only
    // the module, the admin's health and stats, and the test kit reach the relay. Specs may cross floors.
    files: ['libs/outbox/src/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            ...Object.entries(CORE_FLOORS).map(([folder, below]) => ({
              target: `./libs/outbox/src/${folder}`,
              from: './libs/outbox/src',
              except: [`./${folder}`, ...below.map((b) => `./${b}`)],
              message: `${folder}/ imports only ${below.length ? below.join('/, ') + '/' : 'nothing of the library'}`,
            })),
            ...['outbox.module.ts', 'index.ts'].map((file) => ({
              target: `./libs/outbox/src/${file}`,
              from: FEATURES.map((f) => `./libs/outbox/src/${f}`),
              message: 'the core entry loads no feature: export it from its own entry',
            })),
            // the engine asks the store through its port: pg, pipelining and statement names stay in store/
            ...['relay', 'batch'].map((folder) => ({
              target: `./libs/outbox/src/${folder}`,
              from: './libs/outbox/src/store',
              except: [
                './outbox-store.port.ts',
                './outbox-store.fake.ts',
                ...(folder === 'batch' ? ['./sql'] : []),
              ],
              message: `${folder}/ asks the store through its port (store/outbox-store.port.ts)`,
            })),
            ...FEATURES.filter((f) => !['admin', 'testing'].includes(f)).map((f) => ({
              target: `./libs/outbox/src/${f}`,
              from: './libs/outbox/src/relay',
              message: 'a feature plugs in through @OutboxExtension() and the instrumentation, not the relay',
            })),
          ],
        },
      ],
    },
  },

  {
    files: ['libs/outbox/src/**/*.ts'],
    ignores: ['libs/outbox/src/store/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'pg', message: STORE_ONLY }],
          patterns: [
            { group: ['pg/*'], message: STORE_ONLY },
            { group: ['typeorm/*'], message: `TypeORM's internals (deep imports): ${STORE_ONLY}` },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: `CallExpression[callee.name='require'][arguments.0.value=${PG_OR_TYPEORM_INTERNALS}]`,
          message: STORE_ONLY,
        },
        { selector: `ImportExpression[source.value=${PG_OR_TYPEORM_INTERNALS}]`, message: STORE_ONLY },
        { selector: "MemberExpression[property.name='driver']", message: `TypeORM's driver: ${STORE_ONLY}` },
      ],
    },
  },

  {
    files: ['libs/outbox/src/board/assets/*.js'],
    extends: [js.configs.recommended],
    languageOptions: {
      sourceType: 'script',
      globals: { document: 'readonly', fetch: 'readonly', setInterval: 'readonly' },
    },
  },
  {
    files: ['tools/**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { __dirname: 'readonly', process: 'readonly', require: 'readonly' },
    },
  },
]);
