import { type SafeHtml, html } from './board-html';
import type { OutboxEventDeliveries } from '../admin/outbox-admin.interfaces';
import { type BoardPageContext, badge, layout, time } from './layout.view';
import { actionForm } from './actions.view';

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
    ['Dedupe key', e.dedupeKey ?? '—'],
    ['Schema version', e.schemaVersion],
    ['Occurred', time(e.occurredAt)],
    ['Enqueued', time(e.createdAt)],
    ['Deliver at', time(e.deliverAt)],
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
