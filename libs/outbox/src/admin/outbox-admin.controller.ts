import {
  BadRequestException,
  Body,
  Get,
  HttpCode,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import { OutboxValidationError } from '../errors/outbox.error';
import { OutboxAdminService } from './outbox-admin.service';
import { checkUuid } from './admin-validation';
import type {
  OutboxBackfillReport,
  OutboxBackfillState,
  OutboxBulkReport,
  OutboxBulkRequest,
  OutboxConsumerPause,
  OutboxEventDeliveries,
  OutboxEventSearchPage,
  OutboxFailedEvent,
  OutboxPage,
  OutboxStats,
} from './outbox-admin.interfaces';

/** Body of the replay routes. */
interface ReplayBody {
  consumer?: string;
  eventName?: string;
}

/**
 * The REST face of `OutboxAdminService`, one tenant per request (from the route). Not decorated as a controller
 * here: `OutboxAdminModule.forRoot()` registers a subclass under the chosen path, behind the app's guards, so
 * the routes never exist unguarded by accident. Invalid input answers 400 naming the field.
 */
export class OutboxAdminController {
  constructor(@Inject(OutboxAdminService) private readonly admin: OutboxAdminService) {}

  /** `GET tenants/:tenantId/stats` */
  @Get('tenants/:tenantId/stats')
  stats(@Param('tenantId') tenantId: string): Promise<OutboxStats> {
    return badRequestOnInvalid(() => this.admin.stats(tenantId));
  }

  /** `GET tenants/:tenantId/failed?limit=&offset=&consumer=&eventName=` */
  @Get('tenants/:tenantId/failed')
  failed(
    @Param('tenantId') tenantId: string,
    @Query('limit') limit?: string,
    @Query('offset') offset?: string,
    @Query('consumer') consumer?: string,
    @Query('eventName') eventName?: string,
  ): Promise<OutboxPage<OutboxFailedEvent>> {
    return badRequestOnInvalid(() =>
      this.admin.failedEvents(tenantId, {
        limit: integer(limit),
        offset: integer(offset),
        consumer,
        eventName,
      }),
    );
  }

  /**
   * `GET tenants/:tenantId/events?eventId=&aggregateType=&aggregateId=&correlationId=&eventName=&beforeId=&limit=`:
   * the tenant's events matching every field given (at least one of eventId, aggregateId, correlationId and
   * eventName), newest first; `nextBeforeId` is the next page's `beforeId`.
   */
  @Get('tenants/:tenantId/events')
  search(
    @Param('tenantId') tenantId: string,
    @Query() query: Record<string, string | undefined>,
  ): Promise<OutboxEventSearchPage> {
    return badRequestOnInvalid(() =>
      this.admin.searchEvents(tenantId, {
        eventId: query.eventId,
        aggregateType: query.aggregateType,
        aggregateId: query.aggregateId,
        correlationId: query.correlationId,
        eventName: query.eventName,
        beforeId: query.beforeId,
        limit: integer(query.limit),
      }),
    );
  }

  /** `GET tenants/:tenantId/events/:eventId/deliveries` (404 when the tenant has no such event) */
  @Get('tenants/:tenantId/events/:eventId/deliveries')
  async deliveries(
    @Param('tenantId') tenantId: string,
    @Param('eventId') eventId: string,
  ): Promise<OutboxEventDeliveries> {
    const found = await badRequestOnInvalid(() => this.admin.deliveries(tenantId, eventId));
    if (!found) throw new NotFoundException(`tenant ${tenantId} has no event ${eventId}`);
    return found;
  }

  /** `POST tenants/:tenantId/events/:eventId/replay` with an optional `{ consumer }` */
  @Post('tenants/:tenantId/events/:eventId/replay')
  @HttpCode(200)
  async replayEvent(
    @Param('tenantId') tenantId: string,
    @Param('eventId') eventId: string,
    @Body() body?: ReplayBody,
  ): Promise<{ reset: number }> {
    return {
      reset: await badRequestOnInvalid(() =>
        this.admin.replayEvent(tenantId, eventId, { consumer: body?.consumer }),
      ),
    };
  }

  /** `POST tenants/:tenantId/replay` with an optional `{ consumer, eventName }` */
  @Post('tenants/:tenantId/replay')
  @HttpCode(200)
  async replayFailed(
    @Param('tenantId') tenantId: string,
    @Body() body?: ReplayBody,
  ): Promise<{ reset: number }> {
    return {
      reset: await badRequestOnInvalid(() =>
        this.admin.replayFailed(tenantId, { consumer: body?.consumer, eventName: body?.eventName }),
      ),
    };
  }

  /**
   * `POST tenants/:tenantId/bulk/replay` with `{ consumer?, status?, eventName?, from?, to?, dryRun?, chunkSize? }`
   * (`from` and `to` ISO dates): every matching dead or failed delivery back to pending, in chunks; audited. With
   * `dryRun: true`, the count only, nothing changed and nothing audited.
   */
  @Post('tenants/:tenantId/bulk/replay')
  @HttpCode(200)
  replayMatching(
    @Req() request: { user?: unknown },
    @Param('tenantId') tenantId: string,
    @Body() body?: BulkBody,
  ): Promise<OutboxBulkReport> {
    return badRequestOnInvalid(() =>
      this.admin.replayMatching(tenantId, bulkRequest(body), { audit: { actor: routeActor(request) } }),
    );
  }

  /** `POST tenants/:tenantId/bulk/purge`, the same body: every matching failed event deleted, in chunks; audited. */
  @Post('tenants/:tenantId/bulk/purge')
  @HttpCode(200)
  purgeMatching(
    @Req() request: { user?: unknown },
    @Param('tenantId') tenantId: string,
    @Body() body?: BulkBody,
  ): Promise<OutboxBulkReport> {
    return badRequestOnInvalid(() =>
      this.admin.purgeMatching(tenantId, bulkRequest(body), { audit: { actor: routeActor(request) } }),
    );
  }

  /**
   * `POST tenants/:tenantId/consumers/:consumer/backfill` with `{ since, eventNames?, dryRun?, chunkSize?,
   * pauseMs? }`: a dry run answers the count (200); otherwise the backfill starts in the background and the answer
   * (202) is its id and the rows it will create. `GET tenants/:tenantId/consumers/:consumer/backfills` shows it.
   */
  @Post('tenants/:tenantId/consumers/:consumer/backfill')
  @HttpCode(200)
  async backfill(
    @Param('tenantId') tenantId: string,
    @Param('consumer') consumer: string,
    @Res({ passthrough: true }) response: { status(code: number): unknown },
    @Body() body?: BackfillBody,
  ): Promise<OutboxBackfillReport | { backfillId: string; deliveries: number }> {
    const request = {
      tenantId,
      since: since(body?.since),
      eventNames: body?.eventNames,
      chunkSize: body?.chunkSize,
      pauseMs: body?.pauseMs,
    };
    if (body?.dryRun === true)
      return badRequestOnInvalid(() => this.admin.backfill(consumer, { ...request, dryRun: true }));
    const started = await badRequestOnInvalid(() => this.admin.startBackfill(consumer, request));
    response.status(202);
    return started;
  }

  /**
   * `POST tenants/:tenantId/consumers/:consumer/pause` with an optional `{ reason }`: the tenant's deliveries to
   * the consumer wait until resumed (docs/flow-control.md); audited. `{ paused: false }` when it was already.
   */
  @Post('tenants/:tenantId/consumers/:consumer/pause')
  @HttpCode(200)
  async pauseTenant(
    @Req() request: { user?: unknown },
    @Param('tenantId') tenantId: string,
    @Param('consumer') consumer: string,
    @Body() body?: PauseBody,
  ): Promise<{ paused: boolean }> {
    const audit = { actor: routeActor(request) };
    return {
      paused: await badRequestOnInvalid(() =>
        this.admin.pauseConsumer(consumer, { tenantId, reason: body?.reason }, { audit }),
      ),
    };
  }

  /** `POST tenants/:tenantId/consumers/:consumer/resume`: lifts the tenant's own pause; audited. */
  @Post('tenants/:tenantId/consumers/:consumer/resume')
  @HttpCode(200)
  async resumeTenant(
    @Req() request: { user?: unknown },
    @Param('tenantId') tenantId: string,
    @Param('consumer') consumer: string,
  ): Promise<{ resumed: boolean }> {
    const audit = { actor: routeActor(request) };
    return {
      resumed: await badRequestOnInvalid(() => this.admin.resumeConsumer(consumer, { tenantId }, { audit })),
    };
  }

  /**
   * `POST consumers/:consumer/pause` with an optional `{ reason }`: every tenant's deliveries to the consumer
   * wait. No `tenantId` in the route: the guards must let through only operators of every tenant. Audited (in
   * the nil tenant's log).
   */
  @Post('consumers/:consumer/pause')
  @HttpCode(200)
  async pauseAll(
    @Req() request: { user?: unknown },
    @Param('consumer') consumer: string,
    @Body() body?: PauseBody,
  ): Promise<{ paused: boolean }> {
    const audit = { actor: routeActor(request) };
    return {
      paused: await badRequestOnInvalid(() =>
        this.admin.pauseConsumer(consumer, { reason: body?.reason }, { audit }),
      ),
    };
  }

  /** `POST consumers/:consumer/resume`: lifts the pause of every tenant (tenants' own pauses stay); audited. */
  @Post('consumers/:consumer/resume')
  @HttpCode(200)
  async resumeAll(
    @Req() request: { user?: unknown },
    @Param('consumer') consumer: string,
  ): Promise<{ resumed: boolean }> {
    const audit = { actor: routeActor(request) };
    return { resumed: await badRequestOnInvalid(() => this.admin.resumeConsumer(consumer, {}, { audit })) };
  }

  /** `GET consumers/paused`: every pause in force, of every tenant (the guards as for the routes above). */
  @Get('consumers/paused')
  paused(): Promise<OutboxConsumerPause[]> {
    return badRequestOnInvalid(() => this.admin.pausedConsumers());
  }

  /** `GET tenants/:tenantId/consumers/:consumer/backfills`: the consumer's backfills with their progress. */
  @Get('tenants/:tenantId/consumers/:consumer/backfills')
  async backfills(
    @Param('tenantId') tenantId: string,
    @Param('consumer') consumer: string,
  ): Promise<OutboxBackfillState[]> {
    const [tenant, all] = await badRequestOnInvalid(async () => {
      // validated inside: a bad tenant id answers 400, as on every other route
      const checked = checkUuid('tenantId', tenantId);
      return [checked, await this.admin.backfills(consumer)] as const;
    });
    // a backfill of every tenant shows to each: it names no event
    return all.filter((b) => b.tenantId === null || b.tenantId === tenant);
  }
}

/** Body of the pause routes. */
interface PauseBody {
  reason?: string;
}

/** The actor of a route's audit row: the user the app's guard authenticated (its id, username, email or name). */
function routeActor(request: { user?: unknown }): string {
  const user = request.user as Record<string, unknown> | undefined;
  for (const key of ['id', 'username', 'email', 'name']) {
    const value = user?.[key];
    if (typeof value === 'string' || typeof value === 'number') return String(value).slice(0, 200);
  }
  return 'admin-route';
}

/** Body of the backfill route: `since` an ISO date or `'oldest'`. */
interface BackfillBody {
  since?: string;
  eventNames?: string[];
  dryRun?: boolean;
  chunkSize?: number;
  pauseMs?: number;
}

/** Body of the bulk routes: `from` and `to` ISO dates. */
interface BulkBody {
  consumer?: string;
  status?: 'dead' | 'failed';
  eventName?: string;
  from?: string;
  to?: string;
  dryRun?: boolean;
  chunkSize?: number;
}

function bulkRequest(body: BulkBody | undefined): OutboxBulkRequest {
  return {
    consumer: body?.consumer,
    status: body?.status,
    eventName: body?.eventName,
    from: isoDate(body?.from),
    to: isoDate(body?.to),
    dryRun: body?.dryRun,
    chunkSize: body?.chunkSize,
  };
}

/** An ISO date string becomes a Date; anything else is passed on for the service to refuse by name. */
function isoDate(value: unknown): Date | undefined {
  if (typeof value === 'string' && !Number.isNaN(Date.parse(value))) return new Date(value);
  return value as undefined;
}

/** An ISO date becomes a Date; anything else is passed on for the service to refuse by name. */
function since(value: unknown): Date | 'oldest' {
  if (typeof value === 'string' && value !== 'oldest' && !Number.isNaN(Date.parse(value)))
    return new Date(value);
  return value as 'oldest';
}

/** Query strings of digits become numbers; anything else is passed on for the service to refuse by name. */
function integer(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  return (/^\d{1,15}$/.test(value) ? Number(value) : value) as number;
}

async function badRequestOnInvalid<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof OutboxValidationError)
      throw new BadRequestException({
        statusCode: 400,
        error: 'Bad Request',
        message: error.message,
        field: error.field,
      });
    throw error;
  }
}
