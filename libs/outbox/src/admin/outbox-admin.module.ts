import {
  Controller,
  Inject,
  Module,
  Optional,
  UseGuards,
  type DynamicModule,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { OutboxAdminController } from './outbox-admin.controller';
import { OutboxAdminService } from './outbox-admin.service';
import { OutboxHealthIndicator } from './outbox.health-indicator';
import { guardProblems, routeGuards } from './route-guards';
import type { OutboxAdminModuleOptions } from './outbox-admin-options.interface';

/** Token of the options given to `OutboxAdminModule.forRoot()`. */
export const OUTBOX_ADMIN_OPTIONS = Symbol('OUTBOX_ADMIN_OPTIONS');

/**
 * The operator's side of the outbox: `imports: [OutboxAdminModule]` provides `OutboxAdminService` (stats, failed
 * events, deliveries, replay) and `OutboxHealthIndicator`. `OutboxAdminModule.forRoot({ guards: [AdminGuard],
 * path: 'outbox' })` adds REST routes over the service, for a demo or an internal back office. Without a guard, `app.init()` fails
 * unless `allowUnguarded: true` is given: never expose these routes to the public. Only `forRoot` (no async
 * variant): the guards and path decorate the controller, so they must be known when the module is declared.
 */
@Module({
  providers: [OutboxAdminService, OutboxHealthIndicator],
  exports: [OutboxAdminService, OutboxHealthIndicator],
})
export class OutboxAdminModule implements OnModuleInit {
  constructor(
    @Optional() @Inject(OUTBOX_ADMIN_OPTIONS) private readonly options: OutboxAdminModuleOptions | null,
  ) {}

  /** The routes under `options.path`, behind `options.guards`. */
  static forRoot(options: OutboxAdminModuleOptions): DynamicModule {
    return {
      module: OutboxAdminModule,
      imports: options.imports ?? [],
      controllers: [guardedController(options)],
      providers: [{ provide: OUTBOX_ADMIN_OPTIONS, useValue: options }],
    };
  }

  onModuleInit(): void {
    // imported as a plain module: the service and the health indicator, no routes
    if (!this.options) return;
    const problems = guardProblems('OutboxAdminModule', this.options, messages.unguardedAdmin);
    if (problems.length > 0) throw new OutboxConfigurationError(problems);
  }
}

/** A subclass per `forRoot` call, so two apps (or paths) in one process never share route metadata. */
function guardedController(options: OutboxAdminModuleOptions): Type<OutboxAdminController> {
  class OutboxAdminRoutes extends OutboxAdminController {}
  Controller(options.path ?? 'outbox')(OutboxAdminRoutes);
  // Wrong guards are reported by onModuleInit, with the other boot problems, rather than thrown here.
  const guards = routeGuards(options);
  if (guards.length > 0) UseGuards(...guards)(OutboxAdminRoutes);
  return OutboxAdminRoutes;
}
