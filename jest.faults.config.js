/** `npm run test:faults`: the fault-injection suite (crashes, database restarts, slow consumers, hostile input). */
const base = require('./jest.config.js').projects[1];
module.exports = {
  ...base,
  displayName: 'faults',
  testMatch: ['<rootDir>/test/faults/**/*.fault-spec.ts'],
  testTimeout: 240000,
};
