import { html } from './board-html';
import type { OutboxDoctorReport } from '../model/outbox-doctor-report.interface';
import { type BoardPageContext, badge, layout, time } from './layout.view';

/**
 * The doctor's findings (docs/doctor.md) for the whole database, worst first, each with what to do; `null` when
 * this operator may not see them (they cover every tenant: only an operator of all tenants, or a single-tenant
 * app's, sees them).
 */
export function doctorPage(ctx: BoardPageContext, report: OutboxDoctorReport | null): string {
  if (report === null)
    return layout(
      ctx,
      'Database',
      'doctor',
      html`<p>
        The database checks cover every tenant: only an operator who may see all tenants sees them.
      </p>`,
    );
  const problems = report.findings.filter((f) => f.severity !== 'ok');
  return layout(
    ctx,
    'Database',
    'doctor',
    html`<p data-testid="doctor-summary">
        ${badge(report.severity)} Database <code>${report.database}</code>, schema
        <code>${report.schema}</code>, checked as role <code>${report.role.name}</code> at
        ${time(report.checkedAt)}:
        ${problems.length === 0 ? 'nothing to do.' : `${problems.length} finding(s) to act on.`}
        ${
          report.role.seesAllSessions
            ? ''
            : html`<span class="muted">This role sees only its own sessions' transactions.</span>`
        }
      </p>
      <table data-testid="doctor">
        <caption class="visually-hidden">
          The doctor's findings, worst first
        </caption>
        <thead>
          <tr>
            <th scope="col">Severity</th>
            <th scope="col">Check</th>
            <th scope="col">Finding</th>
            <th scope="col">What to do</th>
          </tr>
        </thead>
        <tbody>
          ${report.findings.map(
            (f) =>
              html`<tr data-severity="${f.severity}" data-check="${f.check}">
                <td>${badge(f.severity)}</td>
                <td>${f.check}</td>
                <td>${f.summary}</td>
                <td>${f.action ?? html`<span class="muted">—</span>`}</td>
              </tr>`,
          )}
        </tbody>
      </table>`,
  );
}
