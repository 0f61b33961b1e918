/**
 * `npm run test:partitioned`'s end-to-end run: the e2e project of jest.config.js, less the specs whose databases are
 * not copies of the (partitioned) template or whose subject is not the outbox's storage — they would run a second
 * time on the layout they already ran on:
 * - test/package/: the packed library in apps of its own, each migrating an empty database of its own;
 * - test/operating/migration-cli: the CLI migrating empty databases; apps/demo: the demo's own database;
 * - the broker specs (RabbitMQ, NATS, and the cross-app route through both): their claims and outcomes are every
 *   consumer's, which the relay, delivery and inbox specs run on the partitioned layout.
 */
const base = require('./jest.config');

const e2e = base.projects.find((project) => project.displayName === 'e2e');

module.exports = {
  ...base,
  projects: [
    {
      ...e2e,
      testPathIgnorePatterns: [
        ...e2e.testPathIgnorePatterns,
        '<rootDir>/test/package/',
        '<rootDir>/test/operating/migration-cli\\.',
        '<rootDir>/apps/',
        '<rootDir>/test/features/brokers-(rabbitmq|nats)\\.',
        '<rootDir>/test/features/cross-app\\.',
      ],
    },
  ],
};
