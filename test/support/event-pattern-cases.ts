/**
 * What `@OnOutboxEvent(pattern)` (and a webhook's `events`) match: one table, run against the TypeScript
 * matcher and the fan-out's SQL by test/delivery/event-pattern.e2e-spec.ts. Every name and pattern here is valid (the
 * explorer refuses the others at boot).
 */
export interface EventPatternCase {
  pattern: string;
  eventName: string;
  matches: boolean;
}

export const EVENT_PATTERN_CASES: readonly EventPatternCase[] = [
  { pattern: '*', eventName: 'billing.invoice.paid.v1', matches: true },
  { pattern: 'crm.contact.created.v1', eventName: 'crm.contact.created.v1', matches: true },
  // an exact name is exact: not another version, not a longer name that starts with it
  { pattern: 'crm.contact.created.v1', eventName: 'crm.contact.created.v2', matches: false },
  { pattern: 'crm.contact.created.v1', eventName: 'crm.contact.created.v1.audit', matches: false },
  { pattern: 'crm.contact.*', eventName: 'crm.contact.created.v1', matches: true },
  { pattern: 'crm.*', eventName: 'crm.contact.created.v1', matches: true },
  // a prefix ends on a dot boundary
  { pattern: 'crm.contact.*', eventName: 'crm.contacts.created.v1', matches: false },
  // … and the prefix alone is not an event of it
  { pattern: 'crm.contact.*', eventName: 'crm.contact', matches: false },
  { pattern: 'crm.contact.*', eventName: 'billing.contact.created.v1', matches: false },
  // `_` and `-` are plain characters (no LIKE wildcards)
  { pattern: 'crm_x.*', eventName: 'crmax.contact.v1', matches: false },
  { pattern: 'crm_x.*', eventName: 'crm_x.contact.v1', matches: true },
  { pattern: 'crm-x.contact.*', eventName: 'crm-x.contact.created.v1', matches: true },
];
