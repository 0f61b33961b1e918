import {
  Controller,
  Inject,
  Module,
  UseFilters,
  UseGuards,
  UseInterceptors,
  type DynamicModule,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { guardProblems, routeGuards } from '../admin/route-guards';
import { thresholdProblems } from '../maintenance/outbox-doctor';
import { OutboxAdminModule } from '../admin/outbox-admin.module';
import { BoardAssets } from './board-assets';
import { BoardCsrfInterceptor } from './board-csrf.interceptor';
import { BoardExceptionFilter } from './board-exception.filter';
import { boardPath } from './board-path';
import { OutboxActivityRecorder } from './outbox-activity.recorder';
import { OutboxBoardController } from './outbox-board.controller';
import { OUTBOX_BOARD_OPTIONS } from './outbox-board.constants';
import { OutboxBoardService } from './outbox-board.service';
import type { OutboxBoardModuleOptions } from './outbox-board-options.interface';

/**
 * The operator's board: server-rendered pages of one tenant at a time (counts, failures, events, consumers,
 * audit log) with replay, purge and pause actions behind a confirmation, served by the app itself under
 * `options.path`, behind `options.guards`. Import next to `OutboxModule`:
 * `OutboxBoardModule.forRoot({ guards: [OpsGuard], tenants: (req) => req.user.tenants })`. Without a guard,
 * `app.init()` fails unless `allowUnguarded: true`; with `tenancy: 'multi'`, without `tenants` too. Needs the
 * migration `OutboxBoard1764500100000` (in `outboxMigrations`). See docs/board.md.
 */
@Module({})
export class OutboxBoardModule implements OnModuleInit {
  constructor(
    @Inject(OUTBOX_BOARD_OPTIONS) private readonly options: OutboxBoardModuleOptions,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly outboxOptions: ResolvedOutboxOptions,
  ) {}

  /** The board under `options.path`, behind `options.guards`. */
  static forRoot(options: OutboxBoardModuleOptions): DynamicModule {
    return {
      module: OutboxBoardModule,
      imports: [OutboxAdminModule, ...(options.imports ?? [])],
      controllers: [guardedController(options)],
      providers: [
        { provide: OUTBOX_BOARD_OPTIONS, useValue: options },
        BoardAssets,
        OutboxBoardService,
        OutboxActivityRecorder,
      ],
    };
  }

  onModuleInit(): void {
    const problems = guardProblems('OutboxBoardModule', this.options, messages.unguardedBoard);
    if (!this.options.tenants && this.outboxOptions.tenancy !== 'single')
      problems.push(messages.boardTenants());
    if (this.options.tenants !== undefined && typeof this.options.tenants !== 'function')
      problems.push(
        messages.badOption(
          'OutboxBoardModule tenants',
          'a function (request) => tenant ids or "all"',
          this.options.tenants,
        ),
      );
    for (const key of ['refreshMs', 'activityFlushMs'] as const) {
      const value = this.options[key];
      if (value !== undefined && (!Number.isSafeInteger(value) || value < (key === 'refreshMs' ? 0 : 100)))
        problems.push(
          messages.badOption(
            `OutboxBoardModule ${key}`,
            key === 'refreshMs' ? 'an integer ≥ 0' : 'an integer ≥ 100',
            value,
          ),
        );
    }
    for (const problem of thresholdProblems(this.options.doctor))
      problems.push(messages.badDoctorThreshold('OutboxBoardModule doctor', problem));
    if (problems.length > 0) throw new OutboxConfigurationError(problems);
  }
}

/** A subclass per `forRoot` call, so two apps (or paths) in one process never share route metadata. */
function guardedController(options: OutboxBoardModuleOptions): Type<OutboxBoardController> {
  class OutboxBoardRoutes extends OutboxBoardController {}
  Controller(boardPath(options.path))(OutboxBoardRoutes);
  UseFilters(BoardExceptionFilter)(OutboxBoardRoutes);
  // after the guards: the token cookie goes only to a browser the app let in
  UseInterceptors(BoardCsrfInterceptor)(OutboxBoardRoutes);
  // Wrong guards are reported by onModuleInit, with the other boot problems, rather than thrown here.
  const guards = routeGuards(options);
  if (guards.length > 0) UseGuards(...guards)(OutboxBoardRoutes);
  return OutboxBoardRoutes;
}
