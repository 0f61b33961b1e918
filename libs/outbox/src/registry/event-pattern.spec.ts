import { isEventPattern, matchesEventPattern } from './event-pattern';

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

  it('matches exact names, prefixes on a dot boundary, and everything for *', () => {
    expect(matchesEventPattern('crm.contact.created.v1', 'crm.contact.created.v1')).toBe(true);
    expect(matchesEventPattern('crm.contact.created.v1', 'crm.contact.created.v2')).toBe(false);
    expect(matchesEventPattern('crm.contact.*', 'crm.contact.created.v1')).toBe(true);
    expect(matchesEventPattern('crm.contact.*', 'crm.contacts.created.v1')).toBe(false);
    expect(matchesEventPattern('*', 'billing.invoice.paid.v1')).toBe(true);
  });
});
