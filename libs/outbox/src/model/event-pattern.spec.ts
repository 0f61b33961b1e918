import { isEventPattern } from './event-pattern';

describe('event patterns', () => {
  it.each([
    ['*', true],
    ['crm.contact.created.v1', true],
    ['crm.contact.*', true],
    ['crm.*', true],
    ['crm', false],
    ['*.created', false],
    ['crm.contact.**', false],
    ['CRM.contact.*', false],
    ['', false],
  ])('%s is a pattern: %s', (pattern, valid) => {
    expect(isEventPattern(pattern)).toBe(valid);
  });

  // What a pattern matches: one table of cases (test/support/event-pattern-cases.ts), run against
  // matchesEventPattern and the fan-out's SQL by test/delivery/event-pattern.e2e-spec.ts.
});
