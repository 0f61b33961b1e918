import { activityKinds, attributeSlowest, describeAttribution, type ActivityRow } from './soak-activity';
import { RELAY_APP } from './soak-readings';

const row = (r: Partial<ActivityRow>): ActivityRow => ({
  backend_type: 'client backend',
  application_name: null,
  state: 'active',
  wait_event_type: null,
  wait_event: null,
  query: null,
  ...r,
});

describe('the soak activity sampler', () => {
  it('names the kinds of work of a sample of pg_stat_activity', () => {
    expect(
      activityKinds([
        row({
          query: `select (b ->> 'deleted')::int as deleted from (select outbox_purge_settled(now()) b) s`,
        }),
        row({
          backend_type: 'autovacuum worker',
          state: null,
          query: 'autovacuum: VACUUM public.event_outbox',
        }),
        row({
          query: 'with fresh as (\n select e.id, e.seq, e.event_name, e.aggregate_type, e.aggregate_id',
        }),
        row({
          application_name: RELAY_APP,
          wait_event_type: 'Lock',
          wait_event: 'transactionid',
          query: 'x',
        }),
        row({ backend_type: 'checkpointer', state: null, wait_event: 'CheckpointerMain' }),
        row({ state: 'idle in transaction', query: `select outbox_purge_settled(now())` }),
      ]),
    ).toEqual(['autovacuum', 'purge', 'relay waits transactionid', 'warm-up']);
    // the producer's own waits are the load, not what an event waits behind
    expect(
      activityKinds([
        row({ application_name: 'bench-soak-producer', wait_event_type: 'IO', wait_event: 'WalSync' }),
      ]),
    ).toEqual([]);
  });

  it("matches the slowest 1% of a window's events with the samples taken while they waited", () => {
    // 200 events of 1 ms, two of 50 ms (the slowest 1%): one while the purge ran (in its one sample), one with
    // nothing seen
    const intervals = [
      ...Array.from({ length: 198 }, (_, i) => ({ committed: i * 5, handled: i * 5 + 1 })),
      { committed: 100, handled: 150 },
      { committed: 700, handled: 750 },
    ];
    const samples = Array.from({ length: 20 }, (_, i) => ({
      at: i * 50 + 25,
      kinds: i === 2 ? ['purge'] : [],
    }));
    const a = attributeSlowest(intervals, samples, { from: 0, to: 1000 })!;
    expect(a).toMatchObject({ events: 2, fromMs: 50, none: 0.5, samples: 20 });
    expect(a.kinds).toEqual([{ kind: 'purge', events: 0.5, time: 0.05 }]);
    // a wait of four samples, the purge in one: a quarter of it
    const long = attributeSlowest([{ committed: 0, handled: 199 }], samples, { from: 0, to: 1000 })!;
    expect(long).toMatchObject({
      events: 1,
      none: 0.75,
      kinds: [{ kind: 'purge', events: 0.25, time: 0.05 }],
    });
    expect(describeAttribution(a)).toBe(
      'slowest 1% (2 events, ≥ 50 ms; 20 samples): purge running in 50% (5% of the window), none 50%',
    );
    expect(attributeSlowest([], samples, { from: 0, to: 1000 })).toBeNull();
  });
});
