/**
 * The soak's optional sampler of the database's other backends (`--activity`): `pg_stat_activity` read every
 * ~50 ms on a connection of its own, each sample reduced to the kinds of work seen (retention's purge, autovacuum,
 * the warm-up of a connection's claims, a checkpoint, a relay backend waiting on a lock or for I/O). Per window,
 * the slowest events (the top 1% of commit → handler) are matched with the samples taken between their commit and
 * their handler: each kind's share of those samples (averaged over the events), beside its share of the window's
 * samples — a kind present during the slowest events' waits much more than during the window is what they waited
 * behind.
 */
import { Client } from 'pg';
import { now } from './stats';
import { RELAY_APP } from './soak-readings';

/** One row of `pg_stat_activity`, as the sampler reads it. */
export interface ActivityRow {
  backend_type: string | null;
  application_name: string | null;
  state: string | null;
  wait_event_type: string | null;
  wait_event: string | null;
  query: string | null;
}

/** The kinds of work seen at one instant (`at`: this process's clock, `now()`). */
export interface ActivitySample {
  at: number;
  kinds: readonly string[];
}

/** An event's commit → handler interval, on this process's clock. */
export interface EventInterval {
  committed: number;
  handled: number;
}

/** The kinds of work one sample of `pg_stat_activity` shows, each once, sorted. */
export function activityKinds(rows: readonly ActivityRow[]): string[] {
  const kinds = new Set<string>();
  for (const row of rows) {
    const query = (row.query ?? '').replace(/\s+/g, ' ').trim();
    if (row.backend_type === 'autovacuum worker') kinds.add('autovacuum');
    else if (row.backend_type === 'checkpointer') {
      // writing or syncing (a spread checkpoint spends most of its time in CheckpointWriteDelay, throttled)
      if (row.wait_event !== null && !['CheckpointerMain', 'CheckpointWriteDelay'].includes(row.wait_event))
        kinds.add('checkpoint');
    } else if (row.state !== 'active') continue;
    // retention's purge: its function's name, or the batch's first line when the text is cut before it
    else if (/purge_settled|^select \(b ->> 'deleted'\)::int as deleted/.test(query)) kinds.add('purge');
    // the fan-out's text (no fan-out runs in the soak: the warm-up of a connection's claims) and its deallocations
    else if (/^with fresh as \( ?select e\.id, e\.seq, e\.event_name, e\.aggregate_type/.test(query))
      kinds.add('warm-up');
    else if (/^deallocate /.test(query)) kinds.add('warm-up');
    else if (
      row.application_name === RELAY_APP &&
      (row.wait_event_type === 'Lock' || row.wait_event_type === 'LWLock' || row.wait_event_type === 'IO')
    )
      kinds.add(`relay waits ${row.wait_event}`);
  }
  return [...kinds].sort();
}

/** What the slowest events of a window saw, and each kind's share of the window's samples. */
export interface ActivityAttribution {
  /** How many events were the slowest (the top 1%, at least one), and the shortest of their latencies (ms). */
  events: number;
  fromMs: number;
  /**
   * Per kind: the share of the samples taken during each slowest event's wait it was in (averaged over those
   * events), and its share of the window's samples.
   */
  kinds: { kind: string; events: number; time: number }[];
  /** The share of the samples during the slowest events' waits that saw no kind (averaged likewise). */
  none: number;
  /** The window's samples. */
  samples: number;
}

/**
 * Matches the slowest `share` of `intervals` (by commit → handler) with the samples taken during each; `samples`
 * of the window alone count for the time share. Null without intervals or samples.
 */
export function attributeSlowest(
  intervals: readonly EventInterval[],
  samples: readonly ActivitySample[],
  window: { from: number; to: number },
  share = 0.01,
): ActivityAttribution | null {
  const inWindow = samples.filter((s) => s.at >= window.from && s.at < window.to);
  if (intervals.length === 0 || inWindow.length === 0) return null;
  const sorted = [...intervals].sort((a, b) => b.handled - b.committed - (a.handled - a.committed));
  const slowest = sorted.slice(0, Math.max(1, Math.round(intervals.length * share)));
  // per kind, the share of each slow event's samples it was in, averaged over the slow events
  const byEvent = new Map<string, number>();
  let none = 0;
  for (const event of slowest) {
    const during = samples.filter((s) => s.at >= event.committed && s.at <= event.handled);
    if (during.length === 0) continue;
    const seen = new Map<string, number>();
    for (const sample of during) for (const k of sample.kinds) seen.set(k, (seen.get(k) ?? 0) + 1);
    none += during.filter((s) => s.kinds.length === 0).length / during.length;
    for (const [k, n] of seen) byEvent.set(k, (byEvent.get(k) ?? 0) + n / during.length);
  }
  const byTime = new Map<string, number>();
  for (const sample of inWindow) for (const k of sample.kinds) byTime.set(k, (byTime.get(k) ?? 0) + 1);
  const kinds = [...new Set([...byEvent.keys(), ...byTime.keys()])]
    .map((kind) => ({
      kind,
      events: (byEvent.get(kind) ?? 0) / slowest.length,
      time: (byTime.get(kind) ?? 0) / inWindow.length,
    }))
    .sort((a, b) => b.events - a.events || b.time - a.time || a.kind.localeCompare(b.kind));
  const last = slowest[slowest.length - 1]!;
  return {
    events: slowest.length,
    fromMs: last.handled - last.committed,
    kinds,
    none: none / slowest.length,
    samples: inWindow.length,
  };
}

/**
 * One line: `slowest 1% (40 events, ≥ 46 ms; 1200 samples): purge running in 62% (18% of the window), autovacuum in
 * 10% (4% of the window), none 28%` (percentages of the samples taken during the slowest events' waits); kinds
 * under 1% of both are left out.
 */
export function describeAttribution(a: ActivityAttribution | null): string {
  if (!a) return 'slowest 1%: no samples';
  const pct = (f: number): string => `${Math.round(f * 100)}%`;
  const parts = a.kinds
    .filter((k) => k.events >= 0.01 || k.time >= 0.01)
    .map(
      (k) =>
        `${k.kind} ${k.kind === 'purge' ? 'running ' : ''}in ${pct(k.events)} (${pct(k.time)} of the window)`,
    );
  return (
    `slowest 1% (${a.events} events, ≥ ${a.fromMs.toFixed(0)} ms; ${a.samples} samples): ` +
    `${[...parts, `none ${pct(a.none)}`].join(', ')}`
  );
}

/** Samples `pg_stat_activity` every `everyMs` until stopped; keeps the samples of the last `keepMs`. */
export class ActivitySampler {
  private samples: ActivitySample[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  private constructor(
    private readonly client: Client,
    private readonly everyMs: number,
    private readonly keepMs: number,
  ) {
    this.loop = this.run();
  }

  static async start(url: string, everyMs = 50, keepMs = 180_000): Promise<ActivitySampler> {
    const client = new Client({ connectionString: url, application_name: 'bench-soak-activity' });
    await client.connect();
    return new ActivitySampler(client, everyMs, keepMs);
  }

  /** The samples kept (the last `keepMs`). */
  taken(): readonly ActivitySample[] {
    return this.samples;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await this.client.end();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const began = now();
      try {
        const { rows } = await this.client.query<ActivityRow>(
          `select backend_type, application_name, state, wait_event_type, wait_event, left(query, 400) as query
             from pg_stat_activity
            where pid <> pg_backend_pid()
              and (datname = current_database() or backend_type in ('autovacuum worker', 'checkpointer'))`,
        );
        this.samples.push({ at: began, kinds: activityKinds(rows) });
      } catch {
        // a sample missed (the server busy or going away): the next one tries again
      }
      const keepFrom = now() - this.keepMs;
      const kept = this.samples.findIndex((s) => s.at >= keepFrom);
      if (kept > 0) this.samples.splice(0, kept);
      const wait = this.everyMs - (now() - began);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
