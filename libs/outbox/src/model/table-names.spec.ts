import { MAX_SCHEMA_LENGTH, outboxNames, schemaProblem } from './table-names';
import { resolveOutboxOptions } from '../options/outbox-options';

describe('the schema option', () => {
  it.each(['public', 'outbox', 'billing_v2', '_private', 'select', 'a'.repeat(MAX_SCHEMA_LENGTH)])(
    'takes the lower-case identifier %s',
    (schema) => {
      expect(schemaProblem(schema)).toBeNull();
    },
  );

  it.each([
    ['an upper-case letter', 'Billing', /lower-case PostgreSQL identifier/],
    ['a quote', 'x"; drop table t; --', /lower-case PostgreSQL identifier/],
    ['a dot', 'app.outbox', /lower-case PostgreSQL identifier/],
    ['a leading digit', '2outbox', /lower-case PostgreSQL identifier/],
    ['the empty string', '', /lower-case PostgreSQL identifier/],
    ['a name too long for its wake-up channel', 'a'.repeat(MAX_SCHEMA_LENGTH + 1), /at most 49 characters/],
    ['a system schema', 'pg_outbox', /belong to PostgreSQL/],
    ['information_schema', 'information_schema', /belong to PostgreSQL/],
    ['a number', 42, /lower-case PostgreSQL identifier/],
  ])('refuses %s', (_, schema, problem) => {
    expect(schemaProblem(schema)).toMatch(problem);
  });

  it('reports a bad schema at boot, with the other problems, naming the option and the value', () => {
    const { problems } = resolveOutboxOptions({ schema: 'Billing', maxAttempts: 0 });
    expect(problems).toEqual([
      expect.stringMatching(/^option schema must be a lower-case PostgreSQL identifier.*got "Billing"$/),
      expect.stringMatching(/^option maxAttempts/),
    ]);
  });

  it('spells the default schema as the released migrations do, and quotes any other', () => {
    const inPublic = outboxNames();
    expect(inPublic).toMatchObject({
      events: 'public.event_outbox',
      dueTenants: 'public.outbox_due_tenants',
      wakeupChannel: 'outbox_wakeup',
      retentionLock: 'outbox:retention',
    });
    const inBilling = outboxNames('billing');
    expect(inBilling).toMatchObject({
      events: '"billing".event_outbox',
      dueTenants: '"billing".outbox_due_tenants',
      wakeupChannel: 'outbox_wakeup_billing',
      retentionLock: 'outbox:retention:billing',
    });
    expect(resolveOutboxOptions({ schema: 'billing' }).options.names).toEqual(inBilling);
  });

  it('gives every name of one schema a counterpart in another, and no name to both', () => {
    const a = outboxNames('a_schema');
    const b = outboxNames('b_schema');
    for (const key of Object.keys(a) as (keyof typeof a)[]) expect(a[key]).not.toEqual(b[key]);
  });

  it('refuses to make names from a schema that would not be safe in SQL text', () => {
    expect(() => outboxNames('x" cascade')).toThrow(/lower-case PostgreSQL identifier/);
  });
});
