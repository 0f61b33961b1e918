import { html, withQuery } from './board-html';
import type { OutboxEventSearch, OutboxEventSearchPage } from '../admin/outbox-admin.interfaces';
import { type BoardPageContext, badge, layout, tenantBase, time } from './layout.view';

/** The search's fields, as the form and its links carry them. */
export type BoardSearch = Omit<OutboxEventSearch, 'limit'>;

const FIELDS: [keyof BoardSearch, string, string][] = [
  ['eventId', 'Event id', '0193…-…'],
  ['aggregateType', 'Aggregate type', 'order (with an id)'],
  ['aggregateId', 'Aggregate id', 'A-1001'],
  ['correlationId', 'Correlation id', 'req-42'],
  ['eventName', 'Event name', 'crm.contact.created.v1'],
];

/** The search page: the form, and the page of events found (newest first) when a field was given. */
export function searchPage(
  ctx: BoardPageContext,
  search: BoardSearch,
  found: OutboxEventSearchPage | null,
): string {
  const base = `${tenantBase(ctx)}/search`;
  const form = html`<form class="filters" method="get" action="${base}" data-testid="search-form">
    ${FIELDS.map(
      ([name, label, placeholder]) =>
        html`<div>
          <label for="s-${name}">${label}</label>
          <input id="s-${name}" name="${name}" value="${search[name] ?? ''}" placeholder="${placeholder}" />
        </div>`,
    )}
    <div><button type="submit">Search</button> <a href="${base}">Clear</a></div>
  </form>`;
  return layout(
    ctx,
    'Search events',
    'search',
    html`${form}${found === null ? hint : results(ctx, search, found)}`,
  );
}

const hint = html`<p class="muted">
  Every field given must match. Event id, aggregate id, correlation id and event name each have an index: a
  search reads one page of it, newest first, whatever the size of the history.
</p>`;

function results(ctx: BoardPageContext, search: BoardSearch, found: OutboxEventSearchPage) {
  if (found.items.length === 0)
    return html`<p data-testid="no-results">
      No event of this tenant matches${search.beforeId ? ' further' : ''}.
    </p>`;
  return html`<table data-testid="search-results">
      <caption class="visually-hidden">
        Events found, newest first
      </caption>
      <thead>
        <tr>
          <th scope="col">Event</th>
          <th scope="col">Status</th>
          <th scope="col">Aggregate</th>
          <th scope="col">Correlation id</th>
          <th scope="col">Created</th>
          <th scope="col">Open / dead deliveries</th>
        </tr>
      </thead>
      <tbody>
        ${found.items.map(
          (e) =>
            html`<tr data-event-id="${e.eventId}">
              <td>
                <a href="${tenantBase(ctx)}/events/${e.eventId}">${e.eventName}</a><br /><code class="small"
                  >${e.eventId}</code
                >
              </td>
              <td>${badge(e.status)}</td>
              <td>${e.aggregateId === null ? '' : `${e.aggregateType ?? ''} ${e.aggregateId}`}</td>
              <td>${e.correlationId ?? ''}</td>
              <td>${time(e.createdAt)}</td>
              <td>${e.deliveriesOpen} / ${e.deliveriesDead}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${
      found.nextBeforeId === null
        ? ''
        : html`<p>
            <a href="${withQuery(`${tenantBase(ctx)}/search`, { ...search, beforeId: found.nextBeforeId })}"
              >Older events</a
            >
          </p>`
    }`;
}
