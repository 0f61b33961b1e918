/** `npm run test:faults`: the fault-injection suite (crashes, database restarts, slow consumers, hostile input). */
const { projects } = require('./jest.config.js');
const { displayName, ...e2e } = projects[1];
module.exports = {
  ...e2e,
  testMatch: ['<rootDir>/test/faults/**/*.fault-spec.ts'],
  testTimeout: 240000,
};
