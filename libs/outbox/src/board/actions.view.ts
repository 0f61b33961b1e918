import { type SafeHtml, html } from './board-html';
import { CSRF_FIELD } from './board-csrf.interceptor';
import { BULK_CHUNK_SIZE } from '../admin/admin-validation';
import { type BoardActionInput, type BoardPageContext, layout, tenantBase } from './layout.view';

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
    case 'pause-consumer':
      return `Pause consumer ${input.consumer}: its deliveries wait, uncharged, until resumed`;
    case 'resume-consumer':
      return `Resume consumer ${input.consumer}: its waiting deliveries are due at once, in order`;
    case 'replay-matching':
      return `Replay every ${input.status ?? 'dead or failed'} delivery${matching(input)}`;
    case 'purge-matching':
      return `Purge every failed event with nothing left open${matching(input)}, with its delivery and inbox rows (cannot be undone)`;
    case 'backfill-consumer':
      return (
        `Backfill consumer ${input.consumer} with the retained events ` +
        `${input.since === 'oldest' ? 'from the oldest' : `since ${input.since}`}` +
        `${input.eventNames ? ` named ${input.eventNames}` : ''}`
      );
  }
}

/** A bulk action's filter, in words. */
function matching(input: BoardActionInput): string {
  return (
    (input.consumer ? ` of consumer ${input.consumer}` : '') +
    (input.eventName ? ` of events named ${input.eventName}` : '') +
    (input.from ? ` created from ${input.from}` : '') +
    (input.to ? ` created before ${input.to}` : '')
  );
}

/** The fields an action's forms post: the action, its target, and this browser's token. */
function hiddenFields(ctx: BoardPageContext, input: BoardActionInput, returnTo?: string): SafeHtml {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${ctx.csrfToken}" />
    <input type="hidden" name="action" value="${input.action}" />
    ${input.eventId ? html`<input type="hidden" name="eventId" value="${input.eventId}" />` : ''}
    ${input.consumer ? html`<input type="hidden" name="consumer" value="${input.consumer}" />` : ''}
    ${input.subscription ? html`<input type="hidden" name="subscription" value="${input.subscription}" />` : ''}
    ${input.since ? html`<input type="hidden" name="since" value="${input.since}" />` : ''}
    ${input.eventNames ? html`<input type="hidden" name="eventNames" value="${input.eventNames}" />` : ''}
    ${input.status ? html`<input type="hidden" name="status" value="${input.status}" />` : ''}
    ${input.eventName ? html`<input type="hidden" name="eventName" value="${input.eventName}" />` : ''}
    ${input.from ? html`<input type="hidden" name="from" value="${input.from}" />` : ''}
    ${input.to ? html`<input type="hidden" name="to" value="${input.to}" />` : ''}
    ${returnTo ? html`<input type="hidden" name="returnTo" value="${returnTo}" />` : ''}`;
}

/** A button that asks for confirmation first: it posts to the confirmation page, which posts the action. */
export function actionForm(
  ctx: BoardPageContext,
  input: BoardActionInput,
  label: string,
  accessibleLabel?: string,
  danger = false,
): SafeHtml {
  return html`<form class="inline" method="post" action="${tenantBase(ctx)}/confirm">
    ${hiddenFields(ctx, input)}
    <button
      type="submit"
      ${danger ? html` class="danger"` : ''}${accessibleLabel ? html` aria-label="${accessibleLabel}"` : ''}
    >
      ${label}
    </button>
  </form>`;
}

/** The confirmation page of an action: what it will do, Confirm (posts it) and Cancel (goes back). */
export function confirmPage(
  ctx: BoardPageContext,
  input: BoardActionInput,
  cancelTo: string,
  /** A backfill's dry run: the deliveries it would create. */
  wouldCreate?: number,
  /** A bulk action's dry run: the deliveries it would reset, or the events it would purge. */
  wouldChange?: number,
): string {
  const purging = input.action === 'purge-event' || input.action === 'purge-matching';
  return layout(
    ctx,
    'Confirm',
    '',
    html`<form class="confirm" method="post" action="${tenantBase(ctx)}/act">
      <p id="confirm-what">${describeAction(input)} in tenant <code>${ctx.tenantId}</code>?</p>
      ${
        wouldCreate === undefined
          ? ''
          : html`<p data-testid="dry-run">
              Dry run: <strong>${wouldCreate}</strong> ${wouldCreate === 1 ? 'delivery' : 'deliveries'} would
              be created now (pending, due at once), in throttled chunks.
            </p>`
      }
      ${
        wouldChange === undefined
          ? ''
          : html`<p data-testid="dry-run">
              Dry run: <strong data-testid="dry-run-count">${wouldChange}</strong>
              ${
                input.action === 'purge-matching'
                  ? `${wouldChange === 1 ? 'event' : 'events'} would be purged`
                  : `${wouldChange === 1 ? 'delivery' : 'deliveries'} would be reset to pending, due now`
              },
              in chunks of ${BULK_CHUNK_SIZE} (rows that change meanwhile are taken or left as they are then).
            </p>`
      }
      ${hiddenFields(ctx, input, cancelTo)}
      <p>
        <button
          type="submit"
          class="${purging ? 'danger' : 'primary'}"
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

/** The consumers page's backfill form: which consumer, since when, which events; it asks for a dry run first. */
export function backfillForm(ctx: BoardPageContext, consumers: readonly string[]): SafeHtml {
  return html`<form method="post" action="${tenantBase(ctx)}/confirm" data-testid="backfill-form">
    <input type="hidden" name="${CSRF_FIELD}" value="${ctx.csrfToken}" />
    <input type="hidden" name="action" value="backfill-consumer" />
    <p>
      <label
        >Consumer
        <select name="consumer" required>
          ${consumers.map((name) => html`<option value="${name}">${name}</option>`)}
        </select></label
      >
      <label>Since <input name="since" placeholder="2026-11-01 or oldest" required /></label>
      <label>Event names <input name="eventNames" placeholder="all it listens to (orders.* …)" /></label>
      <button type="submit">Count and confirm…</button>
    </p>
  </form>`;
}

/**
 * The failures page's bulk form: a filter (consumer, status, event name, created from/to), then Replay or Purge,
 * each confirmed on a page that shows the dry run's count first.
 */
export function bulkForm(
  ctx: BoardPageContext,
  consumers: readonly string[],
  filter: { consumer?: string; eventName?: string },
): SafeHtml {
  return html`<form method="post" action="${tenantBase(ctx)}/confirm" data-testid="bulk-form" class="filters">
    <input type="hidden" name="${CSRF_FIELD}" value="${ctx.csrfToken}" />
    <div>
      <label for="b-consumer">Consumer</label>
      <select id="b-consumer" name="consumer">
        <option value="">any</option>
        ${consumers.map(
          (name) =>
            html`<option value="${name}" ${name === filter.consumer ? html` selected` : ''}>${name}</option>`,
        )}
      </select>
    </div>
    <div>
      <label for="b-status">Status</label>
      <select id="b-status" name="status">
        <option value="dead">dead</option>
        <option value="failed">failed (retrying)</option>
        <option value="">dead or failed (a purge takes dead)</option>
      </select>
    </div>
    <div>
      <label for="b-event">Event name</label>
      <input id="b-event" name="eventName" value="${filter.eventName ?? ''}" placeholder="any" />
    </div>
    <div>
      <label for="b-from">Created from</label>
      <input id="b-from" name="from" placeholder="2026-12-01T00:00Z" />
    </div>
    <div>
      <label for="b-to">Created before</label>
      <input id="b-to" name="to" placeholder="2026-12-02" />
    </div>
    <div>
      <button type="submit" name="action" value="replay-matching">Count and replay…</button>
      <button type="submit" name="action" value="purge-matching" class="danger">Count and purge…</button>
    </div>
  </form>`;
}
