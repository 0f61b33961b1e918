import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable, type CanActivate } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import AxeBuilder from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxModule,
  OutboxService,
  type OutboxEvent,
} from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { OutboxWebhooksModule, OutboxWebhookSubscriptions } from 'nestjs-pg-outbox/webhooks';
import { DataSource } from 'typeorm';
import { buildHttpApp, type HttpTestApp } from '../support/http-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';
import { TENANTS } from '../support/outbox-fixture';
import { OperatorGuard, boardFormSession, tenantsOf } from '../support/board-operators';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from '../../tools/chromium';

const [TENANT_A, TENANT_B] = TENANTS;
/** Screenshots go here (gitignored); docs/images/board.png is a copy of one of them. */
const OUTPUT = join(__dirname, '..', '..', 'test-output', 'board');

/** Bills every order event; fails while `broken` (two attempts, then dead). */
@Injectable()
class BillingConsumer {
  broken = true;
  readonly seen: string[] = [];

  @OnOutboxEvent('test.order.*', {
    consumer: 'billing',
    maxAttempts: 2,
    backoff: { baseMs: 1, capMs: 1, jitter: 0 },
  })
  bill(event: OutboxEvent): void {
    this.seen.push(event.eventId);
    if (this.broken) throw new Error(`card declined for order ${(event.data as { order: string }).order}`);
  }
}

/** A guard whose constructor takes one injected argument, as a session guard's does. */
@Injectable()
class SessionGuard implements CanActivate {
  constructor(private readonly dataSource: DataSource) {}

  canActivate(): boolean {
    return this.dataSource.isInitialized;
  }
}

let db: TestDatabase;
let http: HttpTestApp;
let browser: Browser;
let billing: BillingConsumer;

async function enqueue(tenantId: string, order: string): Promise<string> {
  const dataSource = http.app.get(DataSource);
  return dataSource.transaction((m) =>
    http.app.get(OutboxService).enqueue(m, {
      tenantId,
      eventName: 'test.order.placed.v1',
      payload: { order, amount: 42, note: '<b>not markup</b>' },
    }),
  );
}

async function deliveryStatus(eventId: string): Promise<string | undefined> {
  const [row] = await db.sql<{ status: string }>(
    `select status from outbox_deliveries where event_id = $1 and consumer_name = 'billing'`,
    [eventId],
  );
  return row?.status;
}

async function operator(name: string): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({
    extraHTTPHeaders: { 'x-operator': name },
    viewport: { width: 1366, height: 900 },
  });
  const page = await context.newPage();
  const problems: string[] = [];
  // a CSP violation or a script error shows up here
  page.on('console', (message) => {
    // (the browser's own look for the app's /favicon.ico is the app's business, not the board's)
    if (message.type() === 'error' && !message.location().url.endsWith('/favicon.ico'))
      problems.push(`${message.text()} at ${message.location().url}`);
  });
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('response', (response) => {
    if (response.status() === 404) problems.push(`404 ${response.url()}`);
  });
  return { context, page, problems };
}

async function expectAccessible(page: Page, name: string): Promise<void> {
  const results = await new AxeBuilder({ page }).analyze();
  const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect({ page: name, violations: serious.map((v) => `${v.id}: ${v.help} (${v.nodes.length})`) }).toEqual({
    page: name,
    violations: [],
  });
}

beforeAll(async () => {
  mkdirSync(OUTPUT, { recursive: true });
  db = await createTestDatabase();
  http = await buildHttpApp({
    url: db.url,
    outbox: {
      tenancy: 'multi',
      relay: { enabled: true, pollIntervalMs: 50 },
    },
    providers: [BillingConsumer, OperatorGuard],
    imports: [
      // the audited pause below subscribes a tenant to a loopback receiver
      OutboxWebhooksModule.forRoot({ subscriptions: { allowPrivateTargets: ['127.0.0.1/32'] } }),
      OutboxBoardModule.forRoot({
        guards: [OperatorGuard],
        tenants: tenantsOf,
        refreshMs: 300,
        activityFlushMs: 200,
      }),
    ],
  });
  billing = http.app.get(BillingConsumer);
  browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: [...CHROMIUM_ARGS] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await http?.close();
  await db?.drop();
});

describe('the board in a real browser', () => {
  it('finds a dead delivery, replays it behind a confirmation, sees it delivered, and records who did it', async () => {
    const eventId = await enqueue(TENANT_A, 'A-1001');
    await waitFor(async () => (await deliveryStatus(eventId)) === 'dead', { message: 'a dead delivery' });
    // the activity of the failed attempts reaches the chart's table
    await waitFor(
      async () =>
        (await db.sql(`select 1 from outbox_activity where tenant_id = $1 and failed + dead > 0`, [TENANT_A]))
          .length > 0,
      { message: 'activity rows' },
    );

    const { context, page, problems } = await operator('alice');
    const first = await page.goto(`${http.baseUrl}/outbox/board`);
    expect(first!.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByRole('button', { name: 'Open' }).click();
    expect(page.url()).toBe(`${http.baseUrl}/outbox/board/t/${TENANT_A}`);
    expect(await page.getByTestId('events-failed').textContent()).toBe('1');
    // the live part refreshes without a reload
    await page.waitForSelector('body[data-refreshed-at]', { timeout: 10_000 });
    await expectAccessible(page, 'overview');
    await page.screenshot({ path: join(OUTPUT, 'overview.png'), fullPage: true });

    await page.getByRole('link', { name: 'Failures' }).click();
    const row = page.getByTestId('failures').locator('tbody tr').filter({ hasText: eventId });
    expect(await row.count()).toBe(1);
    expect(await row.textContent()).toContain('card declined for order A-1001');
    expect(await row.textContent()).toContain('dead');
    await expectAccessible(page, 'failures');
    await page.screenshot({ path: join(OUTPUT, 'failures.png'), fullPage: true });

    // every form that posts carries this browser's token, which the board set in a cookie scripts cannot read
    const [tokenCookie] = (await context.cookies()).filter((c) => c.name === 'outbox-board-csrf');
    expect(tokenCookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    const postForms = page.locator('form[method="post"]');
    expect(await postForms.count()).toBeGreaterThan(0);
    expect(await page.locator('form[method="post"] input[name="_csrf"]').count()).toBe(
      await postForms.count(),
    );
    expect(
      new Set(
        await Promise.all(
          (await page.locator('input[name="_csrf"]').all()).map((input) => input.getAttribute('value')),
        ),
      ),
    ).toEqual(new Set([tokenCookie!.value]));

    billing.broken = false;
    await row.getByRole('button', { name: `Replay event ${eventId} for billing` }).click();
    expect(await page.locator('#confirm-what').textContent()).toContain(`Replay event ${eventId}`);
    // nothing changed before the confirmation
    expect(await deliveryStatus(eventId)).toBe('dead');
    await expectAccessible(page, 'confirmation');
    // Confirm has the focus: the keyboard alone confirms
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/t/${TENANT_A}/events/${eventId}?done=replayed&n=1`);
    expect(await page.getByRole('status').textContent()).toContain('1 delivery reset');

    await waitFor(
      async () => {
        await page.reload();
        return (await page.locator('[data-consumer="billing"]').textContent())?.includes('delivered');
      },
      { message: 'the replayed delivery delivered, as the event page shows it' },
    );
    expect(await page.locator('pre.payload').textContent()).toContain('"note": "<b>not markup</b>"');
    await expectAccessible(page, 'event');
    await page.screenshot({ path: join(OUTPUT, 'event.png'), fullPage: true });

    const audit = await db.sql<{ actor: string; action: string; rows_affected: number; target: unknown }>(
      `select actor, action, rows_affected, target from outbox_audit where tenant_id = $1`,
      [TENANT_A],
    );
    expect(audit).toEqual([
      { actor: 'alice', action: 'replayEvent', rows_affected: 1, target: { eventId, consumer: 'billing' } },
    ]);
    await page.getByRole('link', { name: 'Audit log' }).click();
    const entry = page.getByTestId('audit').locator('tbody tr');
    expect(await entry.count()).toBe(1);
    expect(await entry.textContent()).toContain('alice');
    expect(await entry.textContent()).toContain('replayEvent');
    await expectAccessible(page, 'audit log');

    await page.getByRole('link', { name: 'Search', exact: true }).click();
    await page.getByLabel('Event name').fill('test.order.placed.v1');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    expect(await page.getByTestId('search-results').locator(`tr[data-event-id="${eventId}"]`).count()).toBe(
      1,
    );
    await expectAccessible(page, 'search');
    await page.screenshot({ path: join(OUTPUT, 'search.png'), fullPage: true });

    await page.goto(`${http.baseUrl}/outbox/board/t/${TENANT_A}?range=24h`);
    expect(await page.locator('.card h3').allTextContents()).toContain(
      'Deliveries per 20 minutes, last 24 hours',
    );
    await expectAccessible(page, 'overview over 24 hours');

    await page.getByRole('link', { name: 'Consumers' }).click();
    expect(await page.getByTestId('consumers').textContent()).toContain('in-process');
    await expectAccessible(page, 'consumers');
    await page.screenshot({ path: join(OUTPUT, 'consumers.png'), fullPage: true });

    expect(problems).toEqual([]);
    await context.close();
  });

  it("keeps an operator of tenant A out of tenant B's pages and actions, by URL too", async () => {
    const eventB = await enqueue(TENANT_B, 'B-2002');
    await waitFor(async () => (await deliveryStatus(eventB)) !== undefined, { message: "B's delivery row" });

    const { context, page } = await operator('alice');
    for (const path of [
      `t/${TENANT_B}`,
      `t/${TENANT_B}/events/${eventB}`,
      `t/${TENANT_B}/failures`,
      `t/${TENANT_B}/fragments/overview`,
    ]) {
      const response = await page.goto(`${http.baseUrl}/outbox/board/${path}`);
      expect({ path, status: response!.status() }).toEqual({ path, status: 403 });
      const text = await page.content();
      expect(text).not.toContain('B-2002');
    }
    await page.goto(`${http.baseUrl}/outbox/board/t/${TENANT_A}`);
    const act = await page.request.post(`${http.baseUrl}/outbox/board/t/${TENANT_B}/act`, {
      form: { action: 'replay-event', eventId: eventB },
      maxRedirects: 0,
    });
    expect(act.status()).toBe(403);
    // the picker offers tenant A only
    expect(await page.locator('#tenant-picker option').allTextContents()).toEqual([TENANT_A]);
    await context.close();

    // an operator allowed every tenant does see it
    const root = await operator('root');
    const allowed = await root.page.goto(`${http.baseUrl}/outbox/board/t/${TENANT_B}/events/${eventB}`);
    expect(allowed!.status()).toBe(200);
    expect(await root.page.locator('pre.payload').textContent()).toContain('B-2002');
    await root.context.close();
  });

  it('refuses a request the guard refuses, and a cross-site form post', async () => {
    const anonymous = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}`);
    expect(anonymous.status).toBe(403);
    expect(anonymous.headers.get('content-security-policy')).toContain("default-src 'none'");
    const crossSite = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}/act`, {
      method: 'POST',
      headers: {
        'x-operator': 'alice',
        origin: 'https://evil.example',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'action=replay-consumer&consumer=billing',
      redirect: 'manual',
    });
    expect(crossSite.status).toBe(403);
    expect(await db.sql(`select 1 from outbox_audit where action = 'replayFailed'`)).toEqual([]);
  });
});

describe('forged board actions', () => {
  const board = () => `${http.baseUrl}/outbox/board/t/${TENANT_A}`;

  /** Opens a board page as the operator's browser does: the cookie the board sets, and the token its forms carry. */
  const session = () => boardFormSession(`${board()}/failures`);

  /** A form post with the operator's credentials (the guard lets it in, as a browser's basic auth would). */
  async function post(
    page: 'act' | 'confirm',
    fields: Record<string, string>,
    headers: Record<string, string>,
  ): Promise<number> {
    const response = await fetch(`${board()}/${page}`, {
      method: 'POST',
      headers: { 'x-operator': 'alice', 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(fields).toString(),
      redirect: 'manual',
    });
    return response.status;
  }

  const auditOf = (eventId: string) =>
    db.sql<{ action: string }>(`select action from outbox_audit where target ->> 'eventId' = $1`, [eventId]);

  it("refuses a post without this session's token, whatever headers it lacks, and changes nothing", async () => {
    billing.broken = true;
    const eventId = await enqueue(TENANT_A, 'A-3003');
    await waitFor(async () => (await deliveryStatus(eventId)) === 'dead', { message: 'a dead delivery' });
    const auditRows = async () => (await db.sql(`select 1 from outbox_audit`)).length;
    const before = await auditRows();
    const replay = { action: 'replay-event', eventId, consumer: 'billing' };
    const mine = await session();
    const theirs = await session();
    const sameOrigin = { origin: new URL(http.baseUrl).origin, 'sec-fetch-site': 'same-origin' };

    const forged: [what: string, page: 'act' | 'confirm', Record<string, string>, Record<string, string>][] =
      [
        ['Origin null, no Sec-Fetch-Site, no token', 'act', replay, { origin: 'null' }],
        ['no Origin, no Sec-Fetch-Site, no token', 'act', replay, {}],
        ['same-origin headers, no token', 'act', replay, sameOrigin],
        ['the cookie without the token', 'act', replay, { cookie: mine.cookie, origin: 'null' }],
        ['the token without the cookie', 'act', { ...replay, _csrf: mine.token }, { origin: 'null' }],
        ["another session's token", 'act', { ...replay, _csrf: theirs.token }, { cookie: mine.cookie }],
        [
          "another session's token, same-origin headers",
          'act',
          { ...replay, _csrf: theirs.token },
          { cookie: mine.cookie, ...sameOrigin },
        ],
        [
          'the cookie twice (one planted by a sibling site)',
          'act',
          { ...replay, _csrf: theirs.token },
          { cookie: `${theirs.cookie}; ${mine.cookie}` },
        ],
        ['a token that is not one', 'act', { ...replay, _csrf: 'x' }, { cookie: 'outbox-board-csrf=x' }],
        ['the confirmation page, no token', 'confirm', replay, { origin: 'null' }],
        [
          "the confirmation page, another session's token",
          'confirm',
          { ...replay, _csrf: theirs.token },
          { cookie: mine.cookie },
        ],
      ];
    for (const [what, page, fields, headers] of forged)
      expect({ what, status: await post(page, fields, headers) }).toEqual({ what, status: 403 });
    expect(await deliveryStatus(eventId)).toBe('dead');
    expect(await auditOf(eventId)).toEqual([]);
    expect(await auditRows()).toBe(before);

    // the session's own cookie and token, with Origin null as the board's own pages send it (no-referrer): it runs
    expect(mine.token).toMatch(/^[\w-]{43}$/);
    expect(mine.token).not.toBe(theirs.token);
    expect(
      await post('confirm', { ...replay, _csrf: mine.token }, { cookie: mine.cookie, origin: 'null' }),
    ).toBe(200);
    expect(await post('act', { ...replay, _csrf: mine.token }, { cookie: mine.cookie, origin: 'null' })).toBe(
      303,
    );
    expect(await auditOf(eventId)).toEqual([{ action: 'replayEvent' }]);
    billing.broken = false;
  });
  it('over HTTPS uses a __Host- cookie, which no other site can plant, and takes no other name', async () => {
    // express sees HTTPS behind a proxy that says so, once the app trusts that proxy
    const express = http.app.getHttpAdapter().getInstance() as { set(name: string, value: unknown): void };
    express.set('trust proxy', 'loopback');
    try {
      const https = { 'x-forwarded-proto': 'https' };
      const page = await fetch(`${board()}/consumers`, { headers: { 'x-operator': 'alice', ...https } });
      const set = page.headers.getSetCookie();
      expect(set).toEqual([
        expect.stringMatching(
          /^__Host-outbox-board-csrf=[\w-]{43}; Path=\/; HttpOnly; SameSite=Strict; Secure$/,
        ),
      ]);
      const cookie = set[0]!.split(';')[0]!;
      const token = cookie.slice(cookie.indexOf('=') + 1);
      const fields = { action: 'pause-subscription', subscription: 'no-such-subscription', _csrf: token };
      expect(await post('act', fields, { ...https, cookie: `outbox-board-csrf=${token}` })).toBe(403);
      expect(await post('act', fields, { ...https, cookie })).toBe(303);
    } finally {
      express.set('trust proxy', false);
    }
  });
});

describe("the board's webhook subscriptions", () => {
  it('shows each subscription’s limits in the Limits column, and none for one without', async () => {
    const subscriptions = http.app.get(OutboxWebhookSubscriptions);
    await subscriptions.add(TENANT_A, {
      name: 'capped',
      url: 'http://127.0.0.1:9/hook',
      events: ['test.order.*'],
      concurrency: { global: 3 },
      rateLimit: { limit: 50, intervalMs: 1000 },
    });
    await subscriptions.add(TENANT_A, {
      name: 'free',
      url: 'http://127.0.0.1:9/hook',
      events: ['test.order.*'],
    });
    try {
      const page = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT_A}/consumers`, {
        headers: { 'x-operator': 'alice' },
      });
      const text = (await page.text()).replace(/\s+/g, ' ');
      expect(text).toContain('<th scope="col">Limits</th>');
      expect(text).toMatch(/<th scope="row">capped<\/th>.*?<td>3 in flight · 50 \/ 1000 ms<\/td>/);
      expect(text).toMatch(/<th scope="row">free<\/th>.*?<td>none<\/td>/);
    } finally {
      await subscriptions.remove(TENANT_A, 'capped');
      await subscriptions.remove(TENANT_A, 'free');
    }
  });
});

describe("the admin service's audited actions", () => {
  it("writes the audit row in the action's transaction, with the rows it changed, and lists it newest first", async () => {
    const admin = http.app.get(OutboxAdminService);
    const subscriptions = http.app.get(OutboxWebhookSubscriptions);
    await subscriptions.add(TENANT_A, {
      name: 'erp',
      url: 'http://127.0.0.1:9/hook',
      events: ['test.order.*'],
    });
    const audit = { actor: 'bob' };
    expect(await admin.setSubscriptionPaused(TENANT_A, 'erp', true, { audit })).toBe(true);
    expect((await subscriptions.get(TENANT_A, 'erp'))!.status).toBe('paused');
    expect(await admin.setSubscriptionPaused(TENANT_A, 'nope', false, { audit })).toBe(false);
    expect(await admin.replayFailed(TENANT_A, { consumer: 'nobody' }, { audit })).toBe(0);
    // no audit asked: nothing written
    expect(await admin.setSubscriptionPaused(TENANT_A, 'erp', false)).toBe(true);
    await subscriptions.remove(TENANT_A, 'erp');

    const log = await admin.auditLog(TENANT_A, { limit: 3 });
    expect(log.map((e) => [e.actor, e.action, e.rows, e.target])).toEqual([
      ['bob', 'replayFailed', 0, { consumer: 'nobody', eventName: null }],
      ['bob', 'resumeSubscription', 0, { subscription: 'nope' }],
      ['bob', 'pauseSubscription', 1, { subscription: 'erp' }],
    ]);
    expect(await admin.auditLog(TENANT_B)).toEqual([]);
    await expect(admin.auditLog(TENANT_A, { beforeId: 'x' })).rejects.toMatchObject({ field: 'beforeId' });
  });
});

describe('OutboxBoardModule wiring', () => {
  const boot = async (
    board: Parameters<typeof OutboxBoardModule.forRoot>[0],
    tenancy: 'single' | 'multi',
  ) => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, extra: { max: 2 } }),
        OutboxModule.forRoot({ tenancy, relay: { enabled: false } }),
        OutboxBoardModule.forRoot(board),
      ],
    })
      .setLogger(false as never)
      .compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await app.init();
      return null;
    } catch (error) {
      return error;
    } finally {
      await app.close().catch(() => undefined);
    }
  };

  it('fails at boot without a guard, and without tenants under multi-tenancy, naming both', async () => {
    const error = (await boot({}, 'multi')) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(error.problems).toHaveLength(2);
    expect(error.problems.join('\n')).toMatch(/guard/);
    expect(error.problems.join('\n')).toMatch(/tenants/);
  });

  it('boots unguarded only when allowed, and without tenants when single-tenant', async () => {
    expect(await boot({ allowUnguarded: true }, 'single')).toBeNull();
  });

  it('refuses at boot anything but a non-empty array of guards, naming the option and what was given', async () => {
    const malformed: [guards: unknown, given: RegExp][] = [
      // the case: a lone class whose constructor takes an injected argument (its length is 1, not 0)
      [SessionGuard, /the class SessionGuard on its own/],
      [null, /got null/],
      ['SessionGuard', /got "SessionGuard"/],
      [{ name: 'session' }, /without canActivate/],
      [[SessionGuard, {}], /element 1 is an object/],
      [[class NotAGuard {}], /element 0 is the class NotAGuard/],
      [[], /no guard/],
    ];
    for (const [guards, given] of malformed) {
      for (const allowUnguarded of [undefined, true]) {
        const error = (await boot(
          { guards: guards as never, allowUnguarded, tenants: () => 'all' },
          'multi',
        )) as OutboxConfigurationError | null;
        if (Array.isArray(guards) && guards.length === 0 && allowUnguarded) {
          expect(error).toBeNull();
          continue;
        }
        const label = typeof guards === 'function' ? guards.name : JSON.stringify(guards);
        expect({ guards: label, allowUnguarded, error }).toEqual({
          guards: label,
          allowUnguarded,
          error: expect.any(OutboxConfigurationError),
        });
        expect(error!.message).toMatch(/OutboxBoardModule\.forRoot\(\)/);
        expect(error!.message).toMatch(/guards/);
        expect(error!.message).toMatch(given);
      }
    }
    expect(await boot({ guards: [SessionGuard], tenants: () => 'all' }, 'multi')).toBeNull();
  });
});
