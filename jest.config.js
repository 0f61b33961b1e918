/** Jest runs unit specs (beside the code) and end-to-end specs (test/, real PostgreSQL). */
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
      keepClassNames: true,
    },
    module: { type: 'commonjs' },
  },
];
const common = {
  transform: { '^.+\\.(t|j|mj)s$': swc },
  // Nest 12 ships ES modules: let swc turn them into CommonJS for jest.
  transformIgnorePatterns: ['/node_modules/(?!(@nestjs|file-type|uid)/)'],
  // The workspace package resolves to its TypeScript source (the `@nestjs-pg-outbox/source` export condition).
  testEnvironmentOptions: { customExportConditions: ['@nestjs-pg-outbox/source', 'node', 'node-addons'] },
  testEnvironment: 'node',
};
module.exports = {
  projects: [
    {
      ...common,
      displayName: 'unit',
      // test/ holds unit specs of its own helpers (e.g. the fault suite's seeded choices) beside the e2e specs
      testMatch: [
        '<rootDir>/libs/**/*.spec.ts',
        '<rootDir>/tools/**/*.spec.ts',
        '<rootDir>/test/**/*.spec.ts',
        '<rootDir>/bench/**/*.spec.ts',
      ],
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts', '<rootDir>/apps/*/test/**/*.e2e-spec.ts'],
      // test/types holds the docs' samples, compiled by `npm run typecheck`, not run
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/types/'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  // Read from the root config only (a project's own testTimeout is ignored).
  testTimeout: 60000,
};
