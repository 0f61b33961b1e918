import { Inject, Injectable } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxRelayStall } from '../model/outbox-relay-stall.interface';
import { errorText } from '../errors/error-text';
import { OutboxRelay } from '../relay/outbox.relay';
import { OutboxStore } from '../store/outbox.store';
import type { OldestPendingAgeRow } from '../store/sql/pending-age';
import { PendingAgeReadings } from '../store/pending-age-readings';
import type {
  OutboxDoctorFinding,
  OutboxDoctorSeverity,
  OutboxDoctorThresholds,
} from '../model/outbox-doctor-report.interface';
import { OutboxAdminService } from './outbox-admin.service';

/** Thresholds of {@link OutboxHealthIndicator.isHealthy}. */
export interface OutboxHealthOptions {
  /** Down when the oldest pending work is older than this, in seconds. Default: `300`. */
  maxPendingAgeSeconds?: number;
  /**
   * Down when the relay's last completed round is older than this, in seconds. Default: the longer of 60 s
   * and 10 poll intervals (`relay.pollIntervalMs`).
   */
  maxRoundAgeSeconds?: number;
  /**
   * Also run the doctor's checks (`OutboxAdminService.doctor`, docs/doctor.md) with these thresholds (`true`: the
   * defaults): down on a critical finding, warnings listed in `doctor` without failing the check. They read the
   * statistics views and the outbox tables' catalog: cheap, but more than the backlog probe, so a readiness probe
   * every few seconds may prefer a separate, slower check. Default: `false`.
   */
  doctor?: boolean | OutboxDoctorThresholds;
}

/** What the indicator reports under its key; the shape of a `@nestjs/terminus` `HealthIndicatorResult`. */
export interface OutboxHealthDetails {
  status: 'up' | 'down';
  /** `running`, `stopped`, or `disabled` (relay.enabled is false on this instance: not counted against health). */
  relay: 'running' | 'stopped' | 'disabled';
  lastRoundAt: string | null;
  oldestPendingAgeSeconds: number | null;
  maxPendingAgeSeconds: number;
  /**
   * While the database does not answer this instance (a round trip got no reply within
   * `relay.roundTripTimeoutMs`, and none begun since was answered): that round trip. The check is down then,
   * without reading the backlog.
   */
  stall?: OutboxRelayStall;
  /** With the `doctor` option: the worst severity found, and every finding that is not ok, worst first. */
  doctor?: {
    severity: OutboxDoctorSeverity;
    findings: Pick<OutboxDoctorFinding, 'check' | 'subject' | 'severity' | 'summary' | 'action'>[];
  };
  /** Why it is down. */
  message?: string;
}

/**
 * A health indicator for `@nestjs/terminus` ≥ 11: relay liveness on this instance, and the age of the oldest
 * pending work across every tenant (leaving out consumers no instance hosts any more) against a threshold.
 * It imports nothing from terminus — it returns the result object terminus expects, `{ [key]: { status, … } }`,
 * and a `down` result fails the check — so the library does not need terminus installed:
 * `health.check([() => outboxHealth.isHealthy('outbox', { maxPendingAgeSeconds: 120 })])`.
 * Meant for readiness and alerting; a backlog is no reason to restart a process (do not use it for liveness).
 */
@Injectable()
export class OutboxHealthIndicator {
  /** The backlog's reading, from where this instance's last one proved nothing pending below. */
  private readonly pendingAge = new PendingAgeReadings();

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly relay: OutboxRelay,
    private readonly store: OutboxStore,
    private readonly admin: OutboxAdminService,
  ) {}

  /** Checks the relay and the backlog; never throws (a database error is reported as `down`). */
  async isHealthy<const Key extends string>(
    key: Key,
    options: OutboxHealthOptions = {},
  ): Promise<Record<Key, OutboxHealthDetails>> {
    const maxPendingAgeSeconds = options.maxPendingAgeSeconds ?? 300;
    const maxRoundAgeSeconds =
      options.maxRoundAgeSeconds ?? Math.max(60, (10 * this.options.relay.pollIntervalMs) / 1000);
    const problems: string[] = [];
    const lastRoundAt = this.lastRoundAt();
    let relay: OutboxHealthDetails['relay'] = 'disabled';
    if (this.options.relay.enabled) {
      relay = this.relay.isRunning ? 'running' : 'stopped';
      if (relay === 'stopped') problems.push('the relay is not running on this instance');
      else if (lastRoundAt && Date.now() - lastRoundAt.getTime() > maxRoundAgeSeconds * 1000) {
        problems.push(
          `the relay's last round ended at ${lastRoundAt.toISOString()}, over ${maxRoundAgeSeconds} s ago`,
        );
      }
    }
    let oldestPendingAgeSeconds: number | null = null;
    const stall = this.store.stalled ? this.store.stall : null;
    if (stall) {
      const tenant = stall.tenantId === null ? '' : ` for tenant ${stall.tenantId}`;
      problems.push(
        `the database gave no reply to the relay's ${stall.roundTrip}${tenant} within ${stall.waitedMs} ms ` +
          `at ${stall.at}, and has not answered since`,
      );
    }
    // While the database does not answer, a running relay keeps trying (and says when it answers again): the
    // check does not wait on it too. Otherwise the read is bounded as the relay's round trips are.
    if (!stall || relay !== 'running') {
      try {
        const [row] = await this.store.relayQuery<OldestPendingAgeRow>(
          this.pendingAge.statement(this.options.names, this.options.registry.orphanAfterMs),
          'healthCheck',
        );
        oldestPendingAgeSeconds = Math.max(0, Math.round(this.pendingAge.record(row!) * 10) / 10);
        if (oldestPendingAgeSeconds > maxPendingAgeSeconds) {
          problems.push(
            `the oldest pending work is ${oldestPendingAgeSeconds} s old, over ${maxPendingAgeSeconds} s`,
          );
        }
      } catch (error) {
        problems.push(`could not read the outbox backlog: ${errorText(error)}`);
      }
    }
    let doctor: OutboxHealthDetails['doctor'];
    if (options.doctor) {
      try {
        const report = await this.admin.doctor({
          thresholds: options.doctor === true ? undefined : options.doctor,
        });
        const findings = report.findings
          .filter((f) => f.severity !== 'ok')
          .map(({ check, subject, severity, summary, action }) => ({
            check,
            subject,
            severity,
            summary,
            action,
          }));
        doctor = { severity: report.severity, findings };
        for (const f of findings) if (f.severity === 'critical') problems.push(`doctor: ${f.summary}`);
      } catch (error) {
        problems.push(`could not run the doctor's checks: ${errorText(error)}`);
      }
    }
    const details: OutboxHealthDetails = {
      status: problems.length === 0 ? 'up' : 'down',
      relay,
      lastRoundAt: lastRoundAt?.toISOString() ?? null,
      oldestPendingAgeSeconds,
      maxPendingAgeSeconds,
      ...(stall ? { stall } : {}),
      ...(doctor ? { doctor } : {}),
      ...(problems.length > 0 ? { message: problems.join('; ') } : {}),
    };
    return { [key]: details } as Record<Key, OutboxHealthDetails>;
  }

  /** The relay's last round time, if this relay reports one (read defensively: older relays do not). */
  private lastRoundAt(): Date | null {
    const value: unknown = Reflect.get(this.relay, 'lastRoundAt');
    return value instanceof Date ? value : null;
  }
}
