/*
 * One file, on purpose: it is the board's routing table — every route, its guard, its CSRF check and its form
 * parsing, read in one place so that a reviewer sees that no route escapes them (ADRs 0401, 0808). Each handler is
 * a few lines that parse the request and hand it to OutboxBoardService or OutboxAdminService; the pages are in the
 * *.view.ts files, the queries in admin/board-sql.ts and store/sql. Split by page, the guard and CSRF wiring would
 * be repeated per controller.
 */
import {
  BadRequestException,
  Body,
  ForbiddenException,
  Get,
  HttpCode,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Redirect,
  Req,
} from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { SINGLE_TENANT_ID } from '../model/outbox.constants';
import { OutboxAdminService } from '../admin/outbox-admin.service';
import { checkUuid } from '../admin/admin-validation';
import type { OutboxBackfillRequest, OutboxBulkRequest } from '../admin/outbox-admin.interfaces';
import { BoardAssets } from './board-assets';
import { BoardResponse } from './board-headers';
import { BOARD_CONTEXT } from './board-exception.filter';
import { BOARD_CSRF_TOKEN } from './board-csrf.interceptor';
import { boardBase, boardPath } from './board-path';
import { withQuery } from './board-html';
import {
  auditPage,
  confirmPage,
  doctorPage,
  consumersPage,
  eventPage,
  failuresPage,
  overviewFragment,
  overviewPage,
  pickerPage,
  searchPage,
  type BoardAction,
  type BoardActionInput,
  type BoardPageContext,
} from './views';
import { OutboxBoardService, activityRange } from './outbox-board.service';
import { OUTBOX_BOARD_OPTIONS } from './outbox-board.constants';
import type {
  OutboxBoardModuleOptions,
  OutboxBoardRequest,
  OutboxBoardTenants,
} from './outbox-board-options.interface';

const HTML = 'text/html; charset=utf-8';
const ACTIONS: readonly BoardAction[] = [
  'replay-event',
  'replay-consumer',
  'purge-event',
  'pause-subscription',
  'resume-subscription',
  'backfill-consumer',
  'pause-consumer',
  'resume-consumer',
  'replay-matching',
  'purge-matching',
];
/** What the page says after an action, by the `done` code of the redirect (never text from the URL). */
const DONE: Record<string, (n: number) => string> = {
  replayed: (n) => `Replayed: ${n} ${n === 1 ? 'delivery' : 'deliveries'} reset to pending, due now.`,
  purged: (n) => (n === 1 ? 'Purged the event.' : 'Nothing purged: the event is not settled (or gone).'),
  paused: (n) => (n === 1 ? 'Paused the subscription.' : 'No such subscription.'),
  resumed: (n) => (n === 1 ? 'Resumed the subscription.' : 'No such subscription.'),
  'consumer-paused': (n) =>
    n === 1
      ? 'Paused the consumer for this tenant: its deliveries wait until resumed.'
      : 'The consumer was paused already.',
  'consumer-resumed': (n) =>
    n === 1
      ? 'Resumed the consumer: its waiting deliveries are due now.'
      : 'The consumer was not paused here.',
  'bulk-replayed': (n) => `Replayed: ${n} ${n === 1 ? 'delivery' : 'deliveries'} reset to pending, due now.`,
  'bulk-purged': (n) => `Purged ${n} ${n === 1 ? 'event' : 'events'} with their delivery and inbox rows.`,
  backfilling: (n) =>
    `Backfill started: ${n} ${n === 1 ? 'delivery' : 'deliveries'} to create, in throttled chunks; each is due once created.`,
};

/**
 * The board's pages, fragments, assets and actions. Not decorated as a controller here: `OutboxBoardModule`
 * registers a subclass under the chosen path, behind the app's guards (as `OutboxAdminModule` does) and the
 * `BoardCsrfInterceptor`, which refuses a post without this browser's token before any handler here runs. Every
 * tenant-scoped route checks the tenant against `options.tenants(request)` before reading anything.
 */
export class OutboxBoardController {
  private readonly path: string;

  constructor(
    @Inject(OUTBOX_BOARD_OPTIONS) private readonly options: OutboxBoardModuleOptions,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly outboxOptions: ResolvedOutboxOptions,
    private readonly board: OutboxBoardService,
    private readonly admin: OutboxAdminService,
    private readonly assets: BoardAssets,
  ) {
    this.path = boardPath(options.path);
  }

  @Get('assets/board.css')
  @BoardResponse('text/css; charset=utf-8')
  css(): string {
    return this.assets.css;
  }

  @Get('assets/board.js')
  @BoardResponse('text/javascript; charset=utf-8')
  js(): string {
    return this.assets.js;
  }

  @Get('assets/favicon.svg')
  @BoardResponse('image/svg+xml')
  icon(): string {
    return this.assets.icon;
  }

  @Get()
  @BoardResponse(HTML)
  async root(@Req() request: OutboxBoardRequest): Promise<string> {
    return pickerPage(await this.context(request, null));
  }

  @Get('go')
  @Redirect()
  async go(
    @Req() request: OutboxBoardRequest,
    @Query('tenant') tenant: string,
  ): Promise<{ url: string; statusCode: number }> {
    const ctx = await this.context(request, tenant ?? '');
    return { url: `${ctx.base}/t/${ctx.tenantId}`, statusCode: 303 };
  }

  @Get('t/:tenantId')
  @BoardResponse(HTML)
  async overview(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Query('done') done?: string,
    @Query('n') n?: string,
    @Query('range') range?: string,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId, done, n);
    return overviewPage(ctx, await this.board.overview(ctx.tenantId!, activityRange(range)));
  }

  @Get('t/:tenantId/fragments/overview')
  @BoardResponse(HTML)
  async overviewFragment(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Query('range') range?: string,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId);
    return overviewFragment(ctx, await this.board.overview(ctx.tenantId!, activityRange(range))).value;
  }

  @Get('t/:tenantId/failures')
  @BoardResponse(HTML)
  async failures(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Query('consumer') consumer?: string,
    @Query('eventName') eventName?: string,
    @Query('beforeId') beforeId?: string,
    @Query('done') done?: string,
    @Query('n') n?: string,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId, done, n);
    const filter = { consumer: consumer || undefined, eventName: eventName || undefined, beforeId };
    const [overview, items] = await Promise.all([
      this.board.overview(ctx.tenantId!),
      this.board.troubles(ctx.tenantId!, filter),
    ]);
    return failuresPage(ctx, overview, items, filter);
  }

  /** The search form, and the events it finds (keyset pages, newest first) once a field is given. */
  @Get('t/:tenantId/search')
  @BoardResponse(HTML)
  async search(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Query() query: Record<string, unknown>,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId);
    const field = (name: string): string | undefined => {
      const value = query[name];
      return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
    };
    const search = {
      eventId: field('eventId'),
      aggregateType: field('aggregateType'),
      aggregateId: field('aggregateId'),
      correlationId: field('correlationId'),
      eventName: field('eventName'),
      beforeId: field('beforeId'),
    };
    const asked = Object.entries(search).some(([name, value]) => name !== 'beforeId' && value !== undefined);
    const found = asked ? await this.admin.searchEvents(ctx.tenantId!, search) : null;
    return searchPage(ctx, search, found);
  }

  @Get('t/:tenantId/events/:eventId')
  @BoardResponse(HTML)
  async event(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Param('eventId') eventId: string,
    @Query('done') done?: string,
    @Query('n') n?: string,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId, done, n);
    const event = await this.admin.deliveries(ctx.tenantId!, eventId);
    if (!event) throw new NotFoundException(`Tenant ${ctx.tenantId} has no event ${eventId}.`);
    return eventPage(ctx, event);
  }

  @Get('t/:tenantId/consumers')
  @BoardResponse(HTML)
  async consumers(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Query('done') done?: string,
    @Query('n') n?: string,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId, done, n);
    return consumersPage(ctx, await this.board.consumers(ctx.tenantId!));
  }

  @Get('t/:tenantId/audit')
  @BoardResponse(HTML)
  async audit(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Query('beforeId') beforeId?: string,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId);
    const entries = await this.admin.auditLog(ctx.tenantId!, {
      limit: 50,
      beforeId: beforeId && /^\d{1,18}$/.test(beforeId) ? beforeId : undefined,
    });
    return auditPage(ctx, entries, 50);
  }

  /**
   * The doctor's findings for the whole database (docs/doctor.md): shown to an operator of every tenant (or of a
   * single-tenant app) only, since they count every tenant's rows.
   */
  @Get('t/:tenantId/doctor')
  @BoardResponse(HTML)
  async doctor(@Req() request: OutboxBoardRequest, @Param('tenantId') tenantId: string): Promise<string> {
    const ctx = await this.context(request, tenantId);
    const everyTenant = ctx.tenants === 'all' || this.outboxOptions.tenancy === 'single';
    return doctorPage(ctx, everyTenant ? await this.admin.doctor({ thresholds: this.options.doctor }) : null);
  }

  /** The confirmation page of an action (nothing is changed here). */
  @Post('t/:tenantId/confirm')
  @HttpCode(200)
  @BoardResponse(HTML)
  async confirm(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Body() body: Record<string, unknown> | undefined,
  ): Promise<string> {
    const ctx = await this.context(request, tenantId);
    const input = actionInput(body);
    const wouldCreate =
      input.action === 'backfill-consumer'
        ? (
            await this.admin.backfill(input.consumer!, {
              ...backfillRequest(input, ctx.tenantId!),
              dryRun: true,
            })
          ).deliveries
        : undefined;
    const dryRun = { ...bulkRequest(input), dryRun: true };
    const wouldChange =
      input.action === 'replay-matching'
        ? (await this.admin.replayMatching(ctx.tenantId!, dryRun)).count
        : input.action === 'purge-matching'
          ? (await this.admin.purgeMatching(ctx.tenantId!, dryRun)).count
          : undefined;
    return confirmPage(ctx, input, this.returnTo(ctx, input), wouldCreate, wouldChange);
  }

  /** Runs a confirmed action through the admin service, with its audit row, and goes back to where it came from. */
  @Post('t/:tenantId/act')
  @Redirect()
  async act(
    @Req() request: OutboxBoardRequest,
    @Param('tenantId') tenantId: string,
    @Body() body: Record<string, unknown> | undefined,
  ): Promise<{ url: string; statusCode: number }> {
    const ctx = await this.context(request, tenantId);
    const input = actionInput(body);
    const tenant = ctx.tenantId!;
    const audit = { actor: this.actor(request) };
    let done: string;
    let n: number;
    switch (input.action) {
      case 'replay-event':
        n = await this.admin.replayEvent(tenant, input.eventId!, { consumer: input.consumer, audit });
        done = 'replayed';
        break;
      case 'replay-consumer':
        n = await this.admin.replayFailed(tenant, { consumer: input.consumer }, { audit });
        done = 'replayed';
        break;
      case 'purge-event':
        n = (await this.admin.purgeEvent(tenant, input.eventId!, { audit })) ? 1 : 0;
        done = 'purged';
        break;
      case 'backfill-consumer':
        // in the background: a large backfill outlasts a request (its audit row is written when it ends)
        n = (await this.admin.startBackfill(input.consumer!, backfillRequest(input, tenant), { audit }))
          .deliveries;
        done = 'backfilling';
        break;
      case 'pause-consumer':
        n = (await this.admin.pauseConsumer(input.consumer!, { tenantId: tenant }, { audit })) ? 1 : 0;
        done = 'consumer-paused';
        break;
      case 'resume-consumer':
        n = (await this.admin.resumeConsumer(input.consumer!, { tenantId: tenant }, { audit })) ? 1 : 0;
        done = 'consumer-resumed';
        break;
      case 'replay-matching':
        n = (await this.admin.replayMatching(tenant, bulkRequest(input), { audit })).count;
        done = 'bulk-replayed';
        break;
      case 'purge-matching':
        n = (await this.admin.purgeMatching(tenant, bulkRequest(input), { audit })).count;
        done = 'bulk-purged';
        break;
      case 'pause-subscription':
      case 'resume-subscription': {
        const pause = input.action === 'pause-subscription';
        n = (await this.admin.setSubscriptionPaused(tenant, input.subscription!, pause, { audit })) ? 1 : 0;
        done = pause ? 'paused' : 'resumed';
        break;
      }
    }
    const back = this.returnTo(ctx, input, body?.returnTo);
    // a purged event has no page any more
    const url = input.action === 'purge-event' && n === 1 ? `${ctx.base}/t/${tenant}/failures` : back;
    return { url: `${url}${url.includes('?') ? '&' : '?'}done=${done}&n=${n}`, statusCode: 303 };
  }

  /** Where Cancel and the redirect after an action go: the given board page of this tenant, or the action's own. */
  private returnTo(ctx: BoardPageContext, input: BoardActionInput, given?: unknown): string {
    const tenantRoot = `${ctx.base}/t/${ctx.tenantId}`;
    if (typeof given === 'string' && given.startsWith(`${tenantRoot}`) && !/[\s\\]/.test(given)) {
      return given.replace(/[?&]done=[^&]*&n=\d*/, '');
    }
    if (input.eventId) return `${tenantRoot}/events/${input.eventId}`;
    if (input.action.endsWith('-matching'))
      return withQuery(`${tenantRoot}/failures`, { consumer: input.consumer, eventName: input.eventName });
    if (input.subscription || (input.action.endsWith('-consumer') && input.action !== 'replay-consumer'))
      return `${tenantRoot}/consumers`;
    return `${tenantRoot}/failures`;
  }

  /** The page context: the tenants this operator may see, and the tenant asked for, checked against them. */
  private async context(
    request: OutboxBoardRequest,
    tenantId: string | null,
    done?: string,
    n?: string,
  ): Promise<BoardPageContext> {
    const base = boardBase(request, this.path);
    const tenants = await this.allowedTenants(request);
    const ctx: BoardPageContext = {
      base,
      tenants,
      tenantId: null,
      refreshMs: this.options.refreshMs ?? 5000,
      notice: done && DONE[done] && /^\d{1,9}$/.test(n ?? '') ? DONE[done]!(Number(n)) : null,
      csrfToken: (request as { [BOARD_CSRF_TOKEN]?: string })[BOARD_CSRF_TOKEN] ?? '',
    };
    (request as unknown as Record<symbol, unknown>)[BOARD_CONTEXT] = ctx;
    if (tenantId === null) return ctx;
    const tenant = checkUuid('tenantId', tenantId);
    if (tenants !== 'all' && !tenants.includes(tenant))
      throw new ForbiddenException(`You may not see tenant ${tenant}.`);
    ctx.tenantId = tenant;
    return ctx;
  }

  private async allowedTenants(request: OutboxBoardRequest): Promise<OutboxBoardTenants> {
    if (!this.options.tenants) return this.outboxOptions.tenancy === 'single' ? [SINGLE_TENANT_ID] : [];
    const tenants = await this.options.tenants(request);
    if (tenants === 'all') return 'all';
    return Array.isArray(tenants)
      ? tenants.filter((t): t is string => typeof t === 'string').map((t) => t.toLowerCase())
      : [];
  }

  private actor(request: OutboxBoardRequest): string {
    if (this.options.actor) return String(this.options.actor(request)).slice(0, 200) || 'anonymous';
    const user = request.user as Record<string, unknown> | undefined;
    for (const key of ['id', 'username', 'email', 'name']) {
      const value = user?.[key];
      if (typeof value === 'string' || typeof value === 'number') return String(value).slice(0, 200);
    }
    return 'anonymous';
  }
}

/** The fields of an action's form, checked (the admin service checks their values again). */
function actionInput(body: Record<string, unknown> | undefined): BoardActionInput {
  const field = (name: string): string | undefined => {
    const value = body?.[name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const action = field('action') as BoardAction | undefined;
  if (!action || !ACTIONS.includes(action))
    throw new BadRequestException(`action must be one of ${ACTIONS.join(', ')}.`);
  const input: BoardActionInput = {
    action,
    eventId: field('eventId'),
    consumer: field('consumer'),
    subscription: field('subscription'),
    since: field('since'),
    eventNames: field('eventNames'),
    status: field('status'),
    eventName: field('eventName'),
    from: field('from'),
    to: field('to'),
  };
  if ((action === 'replay-event' || action === 'purge-event') && !input.eventId)
    throw new BadRequestException(`${action} needs an eventId.`);
  if (action.endsWith('-consumer') && !input.consumer)
    throw new BadRequestException(`${action} needs a consumer.`);
  if (action === 'backfill-consumer' && !input.since)
    throw new BadRequestException('backfill-consumer needs since: a date (2026-11-01) or oldest.');
  if (action.endsWith('-subscription') && !input.subscription)
    throw new BadRequestException(`${action} needs a subscription.`);
  return input;
}

/** A backfill form's fields as the admin service's request (which checks them, naming the field). */
function backfillRequest(input: BoardActionInput, tenantId: string): OutboxBackfillRequest {
  const since = input.since!.trim();
  const date = new Date(since);
  return {
    tenantId,
    since: since === 'oldest' ? 'oldest' : Number.isNaN(date.getTime()) ? (since as 'oldest') : date,
    eventNames: input.eventNames?.split(/[\s,]+/).filter((name) => name !== ''),
  };
}

/**
 * A bulk form's filter as the admin service's request, which checks it and names a bad field: the dates as
 * typed (2026-12-01, or a full ISO timestamp) become Dates; anything else is passed on to be refused.
 */
function bulkRequest(input: BoardActionInput): OutboxBulkRequest {
  const date = (value: string | undefined): Date | undefined => {
    if (value === undefined) return undefined;
    const parsed = new Date(value);
    return Number.isNaN(parsed.getTime()) ? (value as unknown as Date) : parsed;
  };
  return {
    consumer: input.consumer,
    status: input.status as OutboxBulkRequest['status'],
    eventName: input.eventName,
    from: date(input.from),
    to: date(input.to),
  };
}
