import { type SafeHtml, html } from './board-html';
import type { BoardConsumersView } from './outbox-board.service';
import { type BoardPageContext, badge, count, layout, tenantBase, time } from './layout.view';
import { actionForm, backfillForm } from './actions.view';
import type { OutboxWebhookSubscription } from '../webhooks/outbox-webhook-options.interface';

/** The consumers of the registry with kind, health and counts; circuits, subscriptions, blocked aggregates, orphans. */
export function consumersPage(ctx: BoardPageContext, v: BoardConsumersView): string {
  const circuits = (name: string) => v.circuits.filter((c) => c.consumer === name);
  const paused = new Set(v.subscriptions.filter((s) => s.status === 'paused').map((s) => s.consumer));
  const pausedHere = new Set(v.pauses.filter((p) => p.tenant_id !== null).map((p) => p.consumer_name));
  const pausedEverywhere = new Set(v.pauses.filter((p) => p.tenant_id === null).map((p) => p.consumer_name));
  // a consumer's deliveries in this tenant: paused here (the board resumes it), or for every tenant (the admin
  // routes or service resume it: the board acts on one tenant)
  const subscriptionConsumers = new Set(v.subscriptions.map((sub) => sub.consumer));
  const pause = (name: string, orphaned: boolean): SafeHtml | string => {
    // a webhook subscription is paused on its own line below
    if (subscriptionConsumers.has(name)) return '';
    if (pausedHere.has(name))
      return actionForm(
        ctx,
        { action: 'resume-consumer', consumer: name },
        'Resume',
        `Resume consumer ${name}`,
      );
    if (pausedEverywhere.has(name)) return html`<span class="muted small">paused for every tenant</span>`;
    if (orphaned) return '';
    return actionForm(ctx, { action: 'pause-consumer', consumer: name }, 'Pause', `Pause consumer ${name}`);
  };
  const health = (c: BoardConsumersView['overview']['consumers'][number]): SafeHtml => {
    const open = circuits(c.name).some((x) => x.state !== 'closed');
    if (c.orphaned) return badge('orphaned');
    if (paused.has(c.name) || pausedHere.has(c.name) || pausedEverywhere.has(c.name)) return badge('paused');
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
            <th scope="col">Delivery</th>
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
                <td>${pause(c.name, c.orphaned)}</td>
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
                    <th scope="col">Limits</th>
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
                        <td>${subscriptionLimitsText(s)}</td>
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
      <section aria-labelledby="backfill-title">
        <h2 id="backfill-title">Backfill a consumer that joined late</h2>
        <p class="muted small">
          Creates the consumer's missing deliveries of this tenant's retained events (each event once), in
          throttled chunks; the count comes first, on the confirmation page.
        </p>
        ${backfillForm(
          ctx,
          v.overview.consumers.filter((c) => !c.orphaned).map((c) => c.name),
        )}
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

/** A subscription's limits, as its row of the board says them: `3 in flight · 50 / 1000 ms`, or `none`. */
function subscriptionLimitsText(s: Pick<OutboxWebhookSubscription, 'concurrency' | 'rateLimit'>): string {
  const parts = [
    ...(s.concurrency ? [`${s.concurrency.global} in flight`] : []),
    ...(s.rateLimit ? [`${s.rateLimit.limit} / ${s.rateLimit.intervalMs} ms`] : []),
  ];
  return parts.length === 0 ? 'none' : parts.join(' · ');
}
