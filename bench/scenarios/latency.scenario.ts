/**
 * 3. Latency. A producer commits events at a steady rate; each event's latency is the time its handler ran
 * minus the producer's timestamp right after COMMIT returned (same process, same monotonic clock). The library
 * relay runs in its scheduled mode (`relay.enabled`, default poll interval), first as is, then with
 * `relay.wake()` called after each commit, then in an app of its own that only LISTENs, beside a producer app
 * that does not relay (a web instance and a worker: the relay is woken by the producer's NOTIFY alone — two Nest
 * apps in one process share nothing but the database). The baseline is a raw relay woken by LISTEN/NOTIFY, the
 * producer sending `pg_notify` after commit on a separate connection. The runs themselves are in
 * `harness/latency-runs.ts`.
 */
import type { BenchScenario } from '../harness/bench-scenario';
import {
  measureLibrary,
  measureRaw,
  POLL_MS,
  pooled,
  WARM_UP_SECONDS,
  type LatencyRun,
} from '../harness/latency-runs';
import { inTurn } from '../harness/stats';

export const latencyScenario: BenchScenario = {
  name: 'latency',
  title: 'Latency, commit to handler (goals: p50 ≤ 2 ms; p99 ≤ 2× the raw NOTIFY-woken relay)',
  async run(context) {
    const { report, options } = context;
    // The tail is made of the machine's stalls, a few per run: runs of each side in turn (forward, then
    // backward), their events pooled, so that one side does not get a quiet stretch and the other a busy one.
    const sides = {
      raw: () => measureRaw(context),
      automatic: () => measureLibrary(context, 'automatic'),
      woken: () => measureLibrary(context, 'woken'),
      notified: () => measureLibrary(context, 'notified'),
    };
    const order = Object.keys(sides) as (keyof typeof sides)[];
    const runs = {
      raw: [] as LatencyRun[],
      automatic: [] as LatencyRun[],
      woken: [] as LatencyRun[],
      notified: [] as LatencyRun[],
    };
    for (let repeat = 0; repeat < options.sizes.latencyRepeats; repeat++) {
      for (const side of inTurn(order, repeat)) runs[side].push(await sides[side]());
    }
    const raw = pooled(runs.raw);
    const automatic = pooled(runs.automatic);
    const woken = pooled(runs.woken);
    const notified = pooled(runs.notified);
    // An automatic wake-up (in-process kick or LISTEN) shows as a median far below the poll interval.
    const hasAutomaticWake = automatic.p50 < POLL_MS / 4;
    report.note(
      `${options.sizes.latencyRate}/s for ${options.sizes.latencySeconds} s after an untimed ${WARM_UP_SECONDS} s warm-up, ` +
        `${options.sizes.latencyRepeats} run(s) per side in turns (forward, then backward), events pooled; ` +
        `each side from a checkpoint (achieved: raw ${raw.ratePerS.toFixed(0)}/s, ` +
        `library ${automatic.ratePerS.toFixed(0)}/s, ${woken.ratePerS.toFixed(0)}/s and ${notified.ratePerS.toFixed(0)}/s); ` +
        `library relay scheduled (relay.enabled, poll every ${POLL_MS} ms)`,
    );
    const lines = (name: string, run: LatencyRun, judged: boolean): void => {
      report.add({
        scenario: 'latency',
        label: `p50, ${name}`,
        value: run.p50,
        unit: 'ms',
        versus: { label: 'raw NOTIFY', value: raw.p50 },
        goal: judged ? { on: 'value', op: '<=', target: 2 } : undefined,
      });
      report.add({
        scenario: 'latency',
        label: `p99, ${name}`,
        value: run.p99,
        unit: 'ms',
        versus: { label: 'raw NOTIFY', value: raw.p99 },
        goal: judged ? { on: 'ratio', op: '<=', target: 2 } : undefined,
      });
      report.add({
        scenario: 'latency',
        label: `max, ${name}`,
        value: run.max,
        unit: 'ms',
        versus: { label: 'raw NOTIFY', value: raw.max },
      });
      if (run.rounds) report.note(`${name}: ${run.rounds}`);
      if (run.missing > 0)
        report.note(`WARNING ${name}: ${run.missing} of ${run.produced} events never reached their handler`);
    };
    lines('library as configured (no wake call)', automatic, hasAutomaticWake);
    lines('library + relay.wake() after commit', woken, !hasAutomaticWake);
    lines('library, relay in another app woken by NOTIFY', notified, true);
    report.note(
      hasAutomaticWake
        ? 'wake-up path measured: the library wakes itself after commit (median far below the poll interval); goals judged on it and on the relay woken by NOTIFY'
        : `wake-up path measured: none automatic (events wait for the ${POLL_MS} ms poll); ` +
            'goals judged on an explicit relay.wake() after each commit',
    );
    if (raw.missing > 0)
      report.note(`WARNING raw: ${raw.missing} of ${raw.produced} events never reached their handler`);
  },
};
