import { outboxNames } from '../../model/table-names';
import { textPerNames } from './statement';

describe('textPerNames', () => {
  it('makes a text once per names object, and again for other names', () => {
    const build = jest.fn((n: { events: string }) => `select 1 from ${n.events}`);
    const text = textPerNames(build);
    const names = outboxNames();
    const other = outboxNames('tenant_outbox');
    expect([text(names), text(names), text(other), text(names)]).toEqual([
      'select 1 from public.event_outbox',
      'select 1 from public.event_outbox',
      'select 1 from "tenant_outbox".event_outbox',
      'select 1 from public.event_outbox',
    ]);
    expect(build.mock.calls.map(([n]) => n)).toEqual([names, other]);
  });
});
