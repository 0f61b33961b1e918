/** The doctor's checks of the outbox's own work: the oldest work not done, and dead deliveries. */
import * as q from '../store/sql/doctor';
import { type DoctorContext, level } from './doctor-context';
import { count, duration, round } from './doctor-format';

/** Dead deliveries counted at most (the count reads the dead index). */
const DEAD_COUNT_CAP = 100_000;

/** The age of the oldest work not done (every tenant), and the oldest open delivery this role sees. */
export async function checkPending(ctx: DoctorContext, orphanAfterMs: number): Promise<void> {
  const [row] = await ctx.query<q.OldestPendingRow>(
    q.oldestPending(ctx.n, orphanAfterMs, ctx.pendingAge.current),
  );
  const seconds = Math.max(0, ctx.pendingAge.record(row!));
  const severity = level(seconds, ctx.t.pendingSeconds);
  const oldest = row!.oldest;
  const what = oldest
    ? ` The oldest open delivery ${ctx.role.row_security ? 'this role can see ' : ''}is ${oldest.status}: event ${oldest.eventId} ` +
      `to consumer "${oldest.consumer}" of tenant ${oldest.tenantId}, ${oldest.attempts} attempt(s)` +
      (oldest.lastError ? `, last error: ${oldest.lastError}` : '') +
      '.'
    : '';
  ctx.findings.push({
    check: 'pending',
    subject: null,
    severity,
    summary:
      seconds === 0
        ? 'Nothing waits to be delivered.'
        : `The oldest work not done is ${duration(seconds)} old.${what}`,
    action:
      severity === 'ok'
        ? null
        : `Check that a relay runs and hosts ${oldest ? `consumer "${oldest.consumer}"` : 'the consumers'} (health ` +
          `check, logs: a failing handler logs a warning per retry). Failed deliveries wait for their next ` +
          `attempt; pending events not yet fanned out mean no relay claims them. The board's Failures page ` +
          `${oldest ? `for tenant ${oldest.tenantId} ` : ''}or OutboxAdminService.stats(tenantId) shows the backlog per consumer.`,
    figures: {
      oldestPendingSeconds: round(seconds),
      consumer: oldest?.consumer ?? null,
      tenantId: oldest?.tenantId ?? null,
      eventId: oldest?.eventId ?? null,
    },
  });
}

/** Dead deliveries, per consumer, waiting for a replay or a purge. */
export async function checkDead(ctx: DoctorContext): Promise<void> {
  const [row] = await ctx.query<q.DeadDeliveriesRow>(q.deadDeliveries(ctx.n, DEAD_COUNT_CAP));
  const dead = row!.dead;
  const severity = level(dead, ctx.t.deadDeliveries);
  const capped = dead >= DEAD_COUNT_CAP ? '+' : '';
  const byConsumer = row!.consumers.map((c) => `"${c.consumer}": ${count(c.dead)}`).join(', ');
  const seen = ctx.role.row_security
    ? ` (row-level security shows role ${ctx.role.user_name} one tenant's rows only: run the doctor as the tables' owner to count every tenant's)`
    : '';
  ctx.findings.push({
    check: 'dead-deliveries',
    subject: null,
    severity,
    summary:
      dead === 0
        ? `No dead delivery${seen}.`
        : `${count(dead)}${capped} dead ${dead === 1 ? 'delivery' : 'deliveries'} (${byConsumer})${seen}.`,
    action:
      dead === 0
        ? null
        : `They wait for an operator: the board's Failures page (or OutboxAdminService.failedEvents) shows each ` +
          `one's last error. Fix the cause, then replay them (replayFailed) or purge them (purgeFailed). A dead ` +
          `delivery to an ordered consumer holds back its aggregate's later events.`,
    figures: { dead, capped: capped !== '' },
  });
}
