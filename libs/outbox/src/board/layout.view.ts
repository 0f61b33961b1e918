/** The layout every board page shares (header, tenant picker, navigation, live regions) and the formatters the pages use. */
import { type SafeHtml, html } from './board-html';
import { BOARD_COUNT_CAP } from './outbox-board.service';
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
  /** This browser's token, which every form that posts carries (see `BoardCsrfInterceptor`). */
  csrfToken: string;
}

/** The actions the board offers, each confirmed on a page of its own before it runs. */
export type BoardAction =
  | 'replay-event'
  | 'replay-consumer'
  | 'purge-event'
  | 'pause-subscription'
  | 'resume-subscription'
  | 'backfill-consumer'
  | 'pause-consumer'
  | 'resume-consumer'
  | 'replay-matching'
  | 'purge-matching';

/** The fields of an action's form. */
export interface BoardActionInput {
  action: BoardAction;
  eventId?: string;
  consumer?: string;
  subscription?: string;
  /** `backfill-consumer`: an ISO date (YYYY-MM-DD or a full timestamp), or `oldest`. */
  since?: string;
  /** `backfill-consumer`: event names or patterns, space-separated (none: every event the consumer listens to). */
  eventNames?: string;
  /** `replay-matching`, `purge-matching`: the filter (`consumer` too); `from` and `to` ISO dates. */
  status?: string;
  eventName?: string;
  from?: string;
  to?: string;
}

export const number = new Intl.NumberFormat('en-US');

export function tenantBase(ctx: BoardPageContext): string {
  return `${ctx.base}/t/${ctx.tenantId}`;
}

export function count(n: number): string {
  return n >= BOARD_COUNT_CAP ? `${number.format(BOARD_COUNT_CAP)}+` : number.format(n);
}

export function estimate(n: number): string {
  return `≈ ${number.format(Math.max(0, n))}`;
}

export function time(date: Date | null): SafeHtml {
  if (!date) return html`<span class="muted">—</span>`;
  const iso = date.toISOString();
  return html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>`;
}

export function age(seconds: number | null): string {
  if (seconds === null) return 'nothing waits';
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

export function badge(status: string): SafeHtml {
  return html`<span class="badge badge-${status.replace(/[^a-z_-]/g, '')}">${status}</span>`;
}

/** The page around every view: header with the tenant picker, navigation, and the main content. */
export function layout(ctx: BoardPageContext, title: string, current: string, body: SafeHtml): string {
  const nav: [string, string][] = ctx.tenantId
    ? [
        ['overview', 'Overview'],
        ['failures', 'Failures'],
        ['search', 'Search'],
        ['consumers', 'Consumers'],
        ['audit', 'Audit log'],
        ['doctor', 'Database'],
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

export function tenantPicker(ctx: BoardPageContext): SafeHtml {
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
export function live(ctx: BoardPageContext, id: string, src: string, inner: SafeHtml): SafeHtml {
  return html`<section class="live" id="${id}" data-live-src="${src}" aria-labelledby="${id}-title">
    ${inner}
  </section>`;
}
