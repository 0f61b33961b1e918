import { html, withQuery } from './board-html';
import type { OutboxAuditEntry } from '../admin/outbox-admin.interfaces';
import { type BoardPageContext, layout, tenantBase, time } from './layout.view';

/** The tenant's audit log, newest first. */
export function auditPage(
  ctx: BoardPageContext,
  entries: readonly OutboxAuditEntry[],
  pageSize: number,
): string {
  return layout(
    ctx,
    'Audit log',
    'audit',
    entries.length === 0
      ? html`<p>No action has been taken on this tenant from the board.</p>`
      : html`<table data-testid="audit">
            <caption class="visually-hidden">
              Actions taken, newest first
            </caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">Action</th>
                <th scope="col">Target</th>
                <th scope="col">Rows</th>
              </tr>
            </thead>
            <tbody>
              ${entries.map(
                (a) =>
                  html`<tr>
                    <td>${time(a.at)}</td>
                    <td>${a.actor}</td>
                    <td>${a.action}</td>
                    <td>
                      ${Object.entries(a.target)
                        .filter(([, v]) => v !== null && v !== undefined)
                        .map(([k, v]) => html`<span class="kv">${k}: <code>${String(v)}</code></span> `)}
                    </td>
                    <td>${a.rows}</td>
                  </tr>`,
              )}
            </tbody>
          </table>
          ${entries.length === pageSize ? html`<p><a href="${withQuery(`${tenantBase(ctx)}/audit`, { beforeId: entries[entries.length - 1]!.id })}">Older entries</a></p>` : ''}`,
  );
}
