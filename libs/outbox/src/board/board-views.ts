// Whole for now: one page builder per board page in one file (ADR 0401); split it per page when a page is added.

import type { OutboxAuditEntry, OutboxEventDeliveries } from '../admin/outbox-admin.interfaces';
import { html, withQuery, type SafeHtml } from './board-html';
import {
  BOARD_COUNT_CAP,
  BOARD_PAGE_SIZE,
  type BoardConsumersView,
  type BoardOverview,
  type BoardTrouble,
} from './outbox-board.service';
import type { OutboxBoardTenants } from './outbox-board-options.interface';

/** Where a page is and what the layout needs to draw its header. */
export interface BoardPageContext {
  /** The board's root URL path, e.g. `/outbox/board` (with the app's global prefix, if any). */
  base: string;
  tenants: OutboxBoardTenants;
  /** The tenant shown, or null on the picker page. */
  tenantId: string | null;
  refreshMs: number;
  /** A message after an action (e.g. "Replayed 1 delivery"). */
  notice?: string | null;
}

/** The actions the board offers, each confirmed on a page of its own before it runs. */
export type BoardAction =
  'replay-event' | 'replay-consumer' | 'purge-event' | 'pause-subscription' | 'resume-subscription';

/** The fields of an action's form. */
export interface BoardActionInput {
  action: BoardAction;
  eventId?: string;
  consumer?: string;
  subscription?: string;
}

const number = new Intl.NumberFormat('en-US');

function tenantBase(ctx: BoardPageContext): string {
  return `${ctx.base}/t/${ctx.tenantId}`;
}

function count(n: number): string {
  return n >= BOARD_COUNT_CAP ? `${number.format(BOARD_COUNT_CAP)}+` : number.format(n);
}

function estimate(n: number): string {
  return `≈ ${number.format(Math.max(0, n))}`;
}

function time(date: Date | null): SafeHtml {
  if (!date) return html`<span class="muted">—</span>`;
  const iso = date.toISOString();
  return html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>`;
}

function age(seconds: number | null): string {
  if (seconds === null) return 'nothing waits';
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

function badge(status: string): SafeHtml {
  return html`<span class="badge badge-${status.replace(/[^a-z_-]/g, '')}">${status}</span>`;
}

/** The page around every view: header with the tenant picker, navigation, and the main content. */
export function layout(ctx: BoardPageContext, title: string, current: string, body: SafeHtml): string {
  const nav: [string, string][] = ctx.tenantId
    ? [
        ['overview', 'Overview'],
        ['failures', 'Failures'],
        ['consumers', 'Consumers'],
        ['audit', 'Audit log'],
      ]
    : [];
  const href = (page: string) => (page === 'overview' ? tenantBase(ctx) : `${tenantBase(ctx)}/${page}`);
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · Outbox board</title>
        <link rel="stylesheet" href="${ctx.base}/assets/board.css" />
        <script src="${ctx.base}/assets/board.js" defer></script>
      </head>
      <body data-refresh-ms="${ctx.refreshMs}">
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
          <p class="brand"><a href="${ctx.base}">Outbox board</a></p>
          ${tenantPicker(ctx)}
          ${
            nav.length > 0
              ? html`<nav aria-label="Board pages">
                  <ul>
                    ${nav.map(
                      ([page, label]) =>
                        html`<li>
                          <a href="${href(page)}" ${page === current ? html` aria-current="page"` : ''}
                            >${label}</a
                          >
                        </li>`,
                    )}
                  </ul>
                </nav>`
              : ''
          }
        </header>
        <main id="main">
          <h1>${title}</h1>
          ${ctx.notice ? html`<p class="notice" role="status">${ctx.notice}</p>` : ''} ${body}
        </main>
      </body>
    </html>`.value;
}

function tenantPicker(ctx: BoardPageContext): SafeHtml {
  const field =
    ctx.tenants === 'all'
      ? html`<input
          id="tenant-picker"
          name="tenant"
          required
          pattern="[0-9a-fA-F-]{36}"
          size="38"
          value="${ctx.tenantId ?? ''}"
          placeholder="tenant id (UUID)"
        />`
      : html`<select id="tenant-picker" name="tenant">
          ${ctx.tenants.map(
            (t) => html`<option value="${t}" ${t === ctx.tenantId ? html` selected` : ''}>${t}</option>`,
          )}
        </select>`;
  return html`<form class="picker" method="get" action="${ctx.base}/go">
    <label for="tenant-picker">Tenant</label> ${field} <button type="submit">Open</button>
  </form>`;
}

/** The page that asks for a tenant (several allowed, none chosen yet). */
export function pickerPage(ctx: BoardPageContext): string {
  const body =
    ctx.tenants === 'all'
      ? html`<p>Enter a tenant id above to open its board.</p>`
      : ctx.tenants.length === 0
        ? html`<p>You may not see any tenant.</p>`
        : html`<ul>
            ${ctx.tenants.map((t) => html`<li><a href="${ctx.base}/t/${t}">${t}</a></li>`)}
          </ul>`;
  return layout(ctx, 'Choose a tenant', '', body);
}

/** A live region: the script fetches `src` (the same page's fragment) every `refreshMs` and swaps it in. */
function live(ctx: BoardPageContext, id: string, src: string, inner: SafeHtml): SafeHtml {
  return html`<section class="live" id="${id}" data-live-src="${src}" aria-labelledby="${id}-title">
    ${inner}
  </section>`;
}

/** The overview's live part (also served alone as its fragment). */
export function overviewFragment(ctx: BoardPageContext, o: BoardOverview): SafeHtml {
  const e = o.events;
  return html`<h2 id="overview-live-title">Now <span class="muted small">(as of ${time(o.at)})</span></h2>
    <div class="cards">
      <div class="card">
        <h3>Oldest waiting work</h3>
        <p class="big" data-testid="oldest-pending">${age(o.oldestPendingAgeSeconds)}</p>
      </div>
      <div class="card">
        <h3>Events</h3>
        <table class="compact">
          <caption class="visually-hidden">
            Events per status
          </caption>
          <tbody>
            <tr>
              <th scope="row">pending</th>
              <td>${count(e.pending)}</td>
            </tr>
            <tr>
              <th scope="row">processing</th>
              <td>${count(e.processing)}</td>
            </tr>
            <tr>
              <th scope="row">failed</th>
              <td data-testid="events-failed">${count(e.failed)}</td>
            </tr>
            <tr>
              <th scope="row">published</th>
              <td>${estimate(e.published)}</td>
            </tr>
            <tr>
              <th scope="row">no handlers</th>
              <td>${estimate(e.no_handlers)}</td>
            </tr>
          </tbody>
        </table>
      </div>
      <div class="card wide">
        <h3>Deliveries per minute, last ${o.activity.length} minutes</h3>
        ${activityChart(o)}
      </div>
    </div>
    <h3>Consumers</h3>
    ${consumerTable(ctx, o)}
    <p class="muted small">
      Open counts are exact up to ${number.format(BOARD_COUNT_CAP)}; published and delivered are the planner's
      estimates (≈): counting them would read the whole history.
    </p>`;
}

function consumerTable(ctx: BoardPageContext, o: BoardOverview): SafeHtml {
  if (o.consumers.length === 0) return html`<p>No consumer is known for this tenant.</p>`;
  return html`<table data-testid="consumer-counts">
    <caption class="visually-hidden">
      Deliveries per consumer and status
    </caption>
    <thead>
      <tr>
        <th scope="col">Consumer</th>
        <th scope="col">Kind</th>
        <th scope="col">Pending</th>
        <th scope="col">Processing</th>
        <th scope="col">Failed</th>
        <th scope="col">Dead</th>
        <th scope="col">Delivered</th>
        <th scope="col">Oldest waiting</th>
      </tr>
    </thead>
    <tbody>
      ${o.consumers.map(
        (c) =>
          html`<tr>
            <th scope="row">
              <a href="${withQuery(`${tenantBase(ctx)}/failures`, { consumer: c.name })}">${c.name}</a>
              ${c.orphaned ? html` ${badge('orphaned')}` : ''}
            </th>
            <td>${c.kind}</td>
            <td>${count(c.pending)}</td>
            <td>${count(c.processing)}</td>
            <td>${count(c.failed)}</td>
            <td>${c.dead > 0 ? html`<strong>${count(c.dead)}</strong>` : count(c.dead)}</td>
            <td>${estimate(c.deliveredEstimate)}</td>
            <td>${time(c.oldestWaitingAt)}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** Bars per minute, drawn as SVG on the server (no script, no inline style: CSP-clean), with a table beside. */
function activityChart(o: BoardOverview): SafeHtml {
  const width = 600;
  const height = 110;
  const slot = width / o.activity.length;
  const max = Math.max(1, ...o.activity.map((a) => a.delivered + a.failed + a.dead));
  const total = o.activity.reduce(
    (sum, a) => ({ delivered: sum.delivered + a.delivered, failures: sum.failures + a.failed + a.dead }),
    { delivered: 0, failures: 0 },
  );
  const bars = o.activity.map((a, i) => {
    const failures = a.failed + a.dead;
    const hOk = (a.delivered / max) * (height - 10);
    const hBad = (failures / max) * (height - 10);
    const x = (i * slot + 1).toFixed(1);
    const w = Math.max(1, slot - 2).toFixed(1);
    const label = `${a.minute.toISOString().slice(11, 16)}Z: ${a.delivered} delivered, ${failures} failed`;
    return html`<g
      ><title>${label}</title>
      <rect
        class="bar-ok"
        x="${x}"
        y="${(height - hOk).toFixed(1)}"
        width="${w}"
        height="${hOk.toFixed(1)}"
      ></rect>
      <rect
        class="bar-bad"
        x="${x}"
        y="${(height - hOk - hBad).toFixed(1)}"
        width="${w}"
        height="${hBad.toFixed(1)}"
      ></rect
    ></g>`;
  });
  return html`<svg
      class="chart"
      viewBox="0 0 ${width} ${height}"
      role="img"
      aria-labelledby="chart-desc"
      preserveAspectRatio="none"
    >
      <desc id="chart-desc">
        ${total.delivered} deliveries and ${total.failures} failed attempts in the last ${o.activity.length}
        minutes; the busiest minute had ${max}.
      </desc>
      ${bars}
    </svg>
    <p class="legend small">
      <span class="key key-ok"></span> delivered <span class="key key-bad"></span> failed or dead ·
      ${number.format(total.delivered)} delivered, ${number.format(total.failures)} failed
    </p>
    <details>
      <summary>Numbers per minute</summary>
      <table class="compact">
        <caption class="visually-hidden">
          Deliveries per minute
        </caption>
        <thead>
          <tr>
            <th scope="col">Minute (UTC)</th>
            <th scope="col">Delivered</th>
            <th scope="col">Failed</th>
            <th scope="col">Dead</th>
          </tr>
        </thead>
        <tbody>
          ${o.activity
            .filter((a) => a.delivered + a.failed + a.dead > 0)
            .map(
              (a) =>
                html`<tr>
                  <td>${a.minute.toISOString().slice(11, 16)}</td>
                  <td>${a.delivered}</td>
                  <td>${a.failed}</td>
                  <td>${a.dead}</td>
                </tr>`,
            )}
        </tbody>
      </table>
    </details>`;
}

/** The tenant's overview page. */
export function overviewPage(ctx: BoardPageContext, o: BoardOverview): string {
  return layout(
    ctx,
    `Tenant ${o.tenantId}`,
    'overview',
    html`${liveToggle(ctx)}${live(ctx, 'overview-live', `${tenantBase(ctx)}/fragments/overview`, overviewFragment(ctx, o))}`,
  );
}

function liveToggle(ctx: BoardPageContext): SafeHtml {
  if (ctx.refreshMs <= 0) return html``;
  return html`<p class="live-controls">
    <button type="button" class="live-toggle" aria-pressed="false" hidden>Pause live updates</button>
    <span class="live-status small muted" aria-live="polite"></span>
  </p>`;
}

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
      <h2>Deliveries</h2>
      ${table}`,
  );
}

/** One event: envelope, pretty payload, every consumer's delivery, and its actions. */
export function eventPage(ctx: BoardPageContext, e: OutboxEventDeliveries): string {
  const settled = e.deliveriesOpen === 0 && ['failed', 'published', 'no_handlers'].includes(e.status);
  const replayable = e.deliveries.filter((d) => d.status === 'dead' || d.status === 'failed');
  const envelope: [string, SafeHtml | string | number][] = [
    ['Event id', html`<code>${e.eventId}</code>`],
    ['Name', e.eventName],
    ['Status', badge(e.status)],
    ['Aggregate', e.aggregateId ? `${e.aggregateType ?? ''}:${e.aggregateId}` : '—'],
    ['Correlation id', e.correlationId ?? '—'],
    ['Schema version', e.schemaVersion],
    ['Occurred', time(e.occurredAt)],
    ['Enqueued', time(e.createdAt)],
    ['Published', time(e.publishedAt)],
    ['Failed', time(e.failedAt)],
    ['Error', e.error ?? '—'],
    ['Deliveries open / dead', `${e.deliveriesOpen} / ${e.deliveriesDead}`],
  ];
  const actions: SafeHtml[] = [];
  if (replayable.length > 0) {
    actions.push(
      actionForm(ctx, { action: 'replay-event', eventId: e.eventId }, 'Replay for every failed consumer'),
    );
    for (const d of replayable)
      actions.push(
        actionForm(
          ctx,
          { action: 'replay-event', eventId: e.eventId, consumer: d.consumer },
          `Replay for ${d.consumer}`,
        ),
      );
  }
  if (settled)
    actions.push(
      actionForm(ctx, { action: 'purge-event', eventId: e.eventId }, 'Purge this event', undefined, true),
    );
  return layout(
    ctx,
    `Event ${e.eventName}`,
    '',
    html`<div class="columns">
        <section aria-labelledby="envelope-title">
          <h2 id="envelope-title">Envelope</h2>
          <table class="compact">
            <caption class="visually-hidden">
              Envelope of the event
            </caption>
            <tbody>
              ${envelope.map(
                ([k, v]) =>
                  html`<tr>
                    <th scope="row">${k}</th>
                    <td>${v}</td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </section>
        <section aria-labelledby="payload-title">
          <h2 id="payload-title">Payload</h2>
          <pre class="payload" tabindex="0" aria-label="Payload as JSON">
${JSON.stringify(e.payload, null, 2)}</pre>
        </section>
      </div>
      <section aria-labelledby="deliveries-title">
        <h2 id="deliveries-title">Deliveries</h2>
        ${
          e.deliveries.length === 0
            ? html`<p>No delivery row yet (the event has not been fanned out, or has no consumer).</p>`
            : html`<table data-testid="deliveries">
                <caption class="visually-hidden">
                  Delivery to each consumer
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Consumer</th>
                    <th scope="col">Status</th>
                    <th scope="col">Attempts</th>
                    <th scope="col">Error</th>
                    <th scope="col">Next attempt</th>
                    <th scope="col">Processed</th>
                    <th scope="col">Inbox row</th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  ${e.deliveries.map(
                    (d) =>
                      html`<tr data-consumer="${d.consumer}">
                        <th scope="row">${d.consumer}</th>
                        <td>${badge(d.status)}</td>
                        <td>${d.attempts}</td>
                        <td>
                          ${d.errorCode ? html`<code>${d.errorCode}</code> ` : ''}<span class="error-text"
                            >${d.lastError ?? ''}</span
                          >
                        </td>
                        <td>
                          ${d.status === 'delivered' || d.status === 'dead' ? time(null) : time(d.nextAttemptAt)}
                        </td>
                        <td>${time(d.processedAt)}</td>
                        <td>${time(d.inboxAt)}</td>
                        <td>${time(d.updatedAt)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
      </section>
      ${
        actions.length > 0
          ? html`<section aria-labelledby="actions-title">
              <h2 id="actions-title">Actions</h2>
              <ul class="actions">
                ${actions.map((a) => html`<li>${a}</li>`)}
              </ul>
            </section>`
          : ''
      }`,
  );
}

/** The consumers of the registry with kind, health and counts; circuits, subscriptions, blocked aggregates, orphans. */
export function consumersPage(ctx: BoardPageContext, v: BoardConsumersView): string {
  const circuits = (name: string) => v.circuits.filter((c) => c.consumer === name);
  const paused = new Set(v.subscriptions.filter((s) => s.status === 'paused').map((s) => s.consumer));
  const health = (c: BoardConsumersView['overview']['consumers'][number]): SafeHtml => {
    const open = circuits(c.name).some((x) => x.state !== 'closed');
    if (c.orphaned) return badge('orphaned');
    if (paused.has(c.name)) return badge('paused');
    if (open) return badge('circuit-open');
    if (c.dead > 0) return badge('dead');
    if (c.failed > 0) return badge('retrying');
    return badge('healthy');
  };
  const orphaned = v.overview.consumers.filter((c) => c.orphaned);
  return layout(
    ctx,
    'Consumers',
    'consumers',
    html`<table data-testid="consumers">
        <caption class="visually-hidden">
          Consumers of this tenant
        </caption>
        <thead>
          <tr>
            <th scope="col">Consumer</th>
            <th scope="col">Kind</th>
            <th scope="col">Listens to</th>
            <th scope="col">Ordered</th>
            <th scope="col">Health</th>
            <th scope="col">Waiting</th>
            <th scope="col">Dead</th>
          </tr>
        </thead>
        <tbody>
          ${v.overview.consumers.map(
            (c) =>
              html`<tr>
                <th scope="row">${c.name}</th>
                <td>${c.kind}</td>
                <td>${c.patterns.join(', ') || '—'}</td>
                <td>${c.ordered ? 'yes' : 'no'}</td>
                <td>${health(c)}</td>
                <td>${count(c.pending + c.failed)}</td>
                <td>${count(c.dead)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
      <section aria-labelledby="circuits-title">
        <h2 id="circuits-title">Webhook circuits</h2>
        ${
          v.circuits.length === 0
            ? html`<p>No webhook has sent from this instance yet.</p>`
            : html`<table>
                <caption class="visually-hidden">
                  Circuit breakers of webhook endpoints (this instance)
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Consumer</th>
                    <th scope="col">URL</th>
                    <th scope="col">State</th>
                    <th scope="col">Failures in a row</th>
                    <th scope="col">Next probe</th>
                  </tr>
                </thead>
                <tbody>
                  ${v.circuits.map(
                    (c) =>
                      html`<tr>
                        <th scope="row">${c.consumer}</th>
                        <td>${c.url}</td>
                        <td>${badge(c.state)}</td>
                        <td>${c.consecutiveFailures}</td>
                        <td>${time(c.probeAt)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
      </section>
      <section aria-labelledby="subscriptions-title">
        <h2 id="subscriptions-title">Webhook subscriptions</h2>
        ${
          v.subscriptions.length === 0
            ? html`<p>This tenant has no webhook subscription.</p>`
            : html`<table data-testid="subscriptions">
                <caption class="visually-hidden">
                  Webhook subscriptions of this tenant
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">URL</th>
                    <th scope="col">Events</th>
                    <th scope="col">Status</th>
                    <th scope="col">Action</th>
                  </tr>
                </thead>
                <tbody>
                  ${v.subscriptions.map(
                    (s) =>
                      html`<tr>
                        <th scope="row">${s.name}</th>
                        <td>${s.url}</td>
                        <td>${s.events.join(', ')}</td>
                        <td>${badge(s.status)}</td>
                        <td>
                          ${
                            s.status === 'active'
                              ? actionForm(
                                  ctx,
                                  { action: 'pause-subscription', subscription: s.name },
                                  'Pause',
                                  `Pause subscription ${s.name}`,
                                )
                              : actionForm(
                                  ctx,
                                  { action: 'resume-subscription', subscription: s.name },
                                  'Resume',
                                  `Resume subscription ${s.name}`,
                                )
                          }
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
      </section>
      <section aria-labelledby="blocked-title">
        <h2 id="blocked-title">Blocked aggregates</h2>
        ${
          v.blocked.length === 0
            ? html`<p>No ordered consumer is held up by a dead delivery.</p>`
            : html`<table>
                <caption class="visually-hidden">
                  Aggregates held up by a dead delivery
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Consumer</th>
                    <th scope="col">Aggregate</th>
                    <th scope="col">Dead event</th>
                  </tr>
                </thead>
                <tbody>
                  ${v.blocked.map(
                    (b) =>
                      html`<tr>
                        <th scope="row">${b.consumer}</th>
                        <td>${b.aggregateType ?? ''}:${b.aggregateId}</td>
                        <td><a href="${tenantBase(ctx)}/events/${b.deadEventId}">${b.deadEventId}</a></td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
      </section>
      <section aria-labelledby="orphans-title">
        <h2 id="orphans-title">Orphaned consumer names</h2>
        ${
          orphaned.length === 0
            ? html`<p>Every consumer named in waiting rows is hosted by a live instance.</p>`
            : html`<p>
                  No live instance hosts these names; their waiting deliveries wait forever (a renamed or
                  removed handler):
                </p>
                <ul>
                  ${orphaned.map((c) => html`<li><code>${c.name}</code>: ${count(c.pending + c.failed)} waiting</li>`)}
                </ul>`
        }
      </section>`,
  );
}

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

/** What an action does, in words, for its button and its confirmation page. */
export function describeAction(input: BoardActionInput): string {
  switch (input.action) {
    case 'replay-event':
      return input.consumer
        ? `Replay event ${input.eventId} for consumer ${input.consumer}`
        : `Replay event ${input.eventId} for every consumer whose delivery failed`;
    case 'replay-consumer':
      return `Replay every dead delivery of consumer ${input.consumer}`;
    case 'purge-event':
      return `Purge event ${input.eventId} with its delivery and inbox rows (cannot be undone)`;
    case 'pause-subscription':
      return `Pause webhook subscription ${input.subscription}`;
    case 'resume-subscription':
      return `Resume webhook subscription ${input.subscription}`;
  }
}

function hiddenFields(input: BoardActionInput, returnTo?: string): SafeHtml {
  return html`<input type="hidden" name="action" value="${input.action}" />
    ${input.eventId ? html`<input type="hidden" name="eventId" value="${input.eventId}" />` : ''}
    ${input.consumer ? html`<input type="hidden" name="consumer" value="${input.consumer}" />` : ''}
    ${input.subscription ? html`<input type="hidden" name="subscription" value="${input.subscription}" />` : ''}
    ${returnTo ? html`<input type="hidden" name="returnTo" value="${returnTo}" />` : ''}`;
}

/** A button that asks for confirmation first: it posts to the confirmation page, which posts the action. */
function actionForm(
  ctx: BoardPageContext,
  input: BoardActionInput,
  label: string,
  accessibleLabel?: string,
  danger = false,
): SafeHtml {
  return html`<form class="inline" method="post" action="${tenantBase(ctx)}/confirm">
    ${hiddenFields(input)}
    <button
      type="submit"
      ${danger ? html` class="danger"` : ''}${accessibleLabel ? html` aria-label="${accessibleLabel}"` : ''}
    >
      ${label}
    </button>
  </form>`;
}

/** The confirmation page of an action: what it will do, Confirm (posts it) and Cancel (goes back). */
export function confirmPage(ctx: BoardPageContext, input: BoardActionInput, cancelTo: string): string {
  return layout(
    ctx,
    'Confirm',
    '',
    html`<form class="confirm" method="post" action="${tenantBase(ctx)}/act">
      <p id="confirm-what">${describeAction(input)} in tenant <code>${ctx.tenantId}</code>?</p>
      ${hiddenFields(input, cancelTo)}
      <p>
        <button
          type="submit"
          class="${input.action === 'purge-event' ? 'danger' : 'primary'}"
          aria-describedby="confirm-what"
          autofocus
        >
          Confirm
        </button>
        <a class="button" href="${cancelTo}">Cancel</a>
      </p>
      <p class="muted small">The action is recorded in the tenant's audit log with your name.</p>
    </form>`,
  );
}

/** An error page (403, 404, 400) in the board's layout. */
export function errorPage(ctx: BoardPageContext, status: number, message: string): string {
  const title =
    status === 403 ? 'Not allowed' : status === 404 ? 'Not found' : status === 400 ? 'Bad request' : 'Error';
  return layout(
    { ...ctx, notice: null },
    title,
    '',
    html`<p data-testid="error" data-status="${status}">${message}</p>
      <p><a href="${ctx.base}">Back to the board</a></p>`,
  );
}
