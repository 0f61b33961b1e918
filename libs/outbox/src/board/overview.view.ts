import { type SafeHtml, html, withQuery } from './board-html';
import {
  BOARD_ACTIVITY_RANGES,
  BOARD_COUNT_CAP,
  type BoardActivityRange,
  type BoardOverview,
} from './outbox-board.service';
import {
  type BoardPageContext,
  age,
  badge,
  count,
  estimate,
  layout,
  live,
  number,
  tenantBase,
  time,
} from './layout.view';

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
              <th scope="row">scheduled</th>
              <td data-testid="events-scheduled">${count(e.scheduled)}</td>
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
        <h3>${chartTitle(o.activityRange)}</h3>
        ${rangeLinks(ctx, o.activityRange)} ${activityChart(o)}
      </div>
    </div>
    <h3>Consumers</h3>
    ${consumerTable(ctx, o)}
    <p class="muted small">
      Open counts are exact up to ${number.format(BOARD_COUNT_CAP)}; published and delivered are the planner's
      estimates (≈): counting them would read the whole history.
    </p>`;
}

export function consumerTable(ctx: BoardPageContext, o: BoardOverview): SafeHtml {
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

function chartTitle(range: BoardActivityRange): string {
  const { bucketMinutes, label } = BOARD_ACTIVITY_RANGES[range];
  return `Deliveries per ${bucketMinutes === 1 ? 'minute' : `${bucketMinutes} minutes`}, ${label}`;
}

/** The chart's spans, as links to the overview (the current one marked). */
function rangeLinks(ctx: BoardPageContext, current: BoardActivityRange): SafeHtml {
  const ranges = Object.keys(BOARD_ACTIVITY_RANGES) as BoardActivityRange[];
  return html`<p class="small" data-testid="chart-ranges">
    Span:
    ${ranges.map(
      (range) =>
        html`<a
          href="${withQuery(tenantBase(ctx), { range: range === '30m' ? null : range })}"
          ${range === current ? html` aria-current="true"` : ''}
          >${range}</a
        > `,
    )}
  </p>`;
}

/** Bars per bucket (a minute or more), drawn as SVG on the server (no script, no inline style: CSP-clean), with a table beside. */
export function activityChart(o: BoardOverview): SafeHtml {
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
        ${total.delivered} deliveries and ${total.failures} failed attempts in the
        ${BOARD_ACTIVITY_RANGES[o.activityRange].label}; the busiest bar had ${max}.
      </desc>
      ${bars}
    </svg>
    <p class="legend small">
      <span class="key key-ok"></span> delivered <span class="key key-bad"></span> failed or dead ·
      ${number.format(total.delivered)} delivered, ${number.format(total.failures)} failed
    </p>
    <details>
      <summary>Numbers per bar</summary>
      <table class="compact">
        <caption class="visually-hidden">
          Deliveries per bar
        </caption>
        <thead>
          <tr>
            <th scope="col">From (UTC)</th>
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
    html`${liveToggle(ctx)}${live(
      ctx,
      'overview-live',
      withQuery(`${tenantBase(ctx)}/fragments/overview`, {
        range: o.activityRange === '30m' ? null : o.activityRange,
      }),
      overviewFragment(ctx, o),
    )}`,
  );
}

export function liveToggle(ctx: BoardPageContext): SafeHtml {
  if (ctx.refreshMs <= 0) return html``;
  return html`<p class="live-controls">
    <button type="button" class="live-toggle" aria-pressed="false" hidden>Pause live updates</button>
    <span class="live-status small muted" aria-live="polite"></span>
  </p>`;
}
