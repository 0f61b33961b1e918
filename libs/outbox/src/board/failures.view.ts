import { html, withQuery } from './board-html';
import { BOARD_PAGE_SIZE, type BoardOverview, type BoardTrouble } from './outbox-board.service';
import { type BoardPageContext, badge, count, layout, tenantBase, time } from './layout.view';
import { actionForm, bulkForm } from './actions.view';

/** The failures page: failed and dead deliveries, filterable, newest first. */
export function failuresPage(
  ctx: BoardPageContext,
  o: BoardOverview,
  items: readonly BoardTrouble[],
  filter: { consumer?: string; eventName?: string; beforeId?: string },
): string {
  const base = `${tenantBase(ctx)}/failures`;
  const consumers = o.consumers.filter((c) => c.failed + c.dead > 0 || c.name === filter.consumer);
  const form = html`<form class="filters" method="get" action="${base}">
    <div>
      <label for="f-consumer">Consumer</label>
      <select id="f-consumer" name="consumer">
        <option value="">any</option>
        ${o.consumers.map(
          (c) =>
            html`<option value="${c.name}" ${c.name === filter.consumer ? html` selected` : ''}>
              ${c.name}
            </option>`,
        )}
      </select>
    </div>
    <div>
      <label for="f-event">Event name</label>
      <input
        id="f-event"
        name="eventName"
        value="${filter.eventName ?? ''}"
        placeholder="crm.contact.created.v1"
      />
    </div>
    <div><button type="submit">Filter</button> <a href="${base}">Clear</a></div>
  </form>`;
  const bulk = consumers
    .filter((c) => c.dead > 0)
    .map(
      (c) =>
        html`<li>
          ${actionForm(ctx, { action: 'replay-consumer', consumer: c.name }, `Replay the ${count(c.dead)} dead deliveries of ${c.name}`)}
        </li>`,
    );
  const table =
    items.length === 0
      ? html`<p data-testid="no-failures">
          No failed or dead delivery${filter.consumer || filter.eventName ? ' matches' : ''}.
        </p>`
      : html`<table data-testid="failures">
            <caption class="visually-hidden">
              Failed and dead deliveries, newest first
            </caption>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Consumer</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Error</th>
                <th scope="col">Updated</th>
                <th scope="col">Action</th>
              </tr>
            </thead>
            <tbody>
              ${items.map(
                (t) =>
                  html`<tr>
                    <td>
                      <a href="${tenantBase(ctx)}/events/${t.eventId}">${t.eventName}</a><br /><code
                        class="small"
                        >${t.eventId}</code
                      >
                    </td>
                    <td>${t.consumer}</td>
                    <td>${badge(t.status)}</td>
                    <td>${t.attempts}</td>
                    <td>
                      ${t.errorCode ? html`<code>${t.errorCode}</code> ` : ''}<span class="error-text"
                        >${t.lastError ?? ''}</span
                      >
                    </td>
                    <td>${time(t.updatedAt)}</td>
                    <td>
                      ${actionForm(ctx, { action: 'replay-event', eventId: t.eventId, consumer: t.consumer }, 'Replay', `Replay event ${t.eventId} for ${t.consumer}`)}
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>
          ${
            items.length === BOARD_PAGE_SIZE
              ? html`<p>
                  <a href="${withQuery(base, { ...filter, beforeId: items[items.length - 1]!.id })}"
                    >Older failures</a
                  >
                </p>`
              : ''
          }`;
  return layout(
    ctx,
    'Failed and dead deliveries',
    'failures',
    html`${form}${
        bulk.length > 0
          ? html`<h2>Replay a consumer's dead letters</h2>
              <ul class="actions">
                ${bulk}
              </ul>`
          : ''
      }
      <h2>Replay or purge everything matching</h2>
      ${bulkForm(
        ctx,
        o.consumers.map((c) => c.name),
        filter,
      )}
      <h2>Deliveries</h2>
      ${table}`,
  );
}
