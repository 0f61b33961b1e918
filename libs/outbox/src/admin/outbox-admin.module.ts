import {
  Controller,
  Inject,
  Module,
  UseGuards,
  type DynamicModule,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { OutboxAdminController } from './outbox-admin.controller';
import { guardProblems, routeGuards } from './route-guards';
import type { OutboxAdminModuleOptions } from './outbox-admin-options.interface';

/** Token of the options given to `OutboxAdminModule.forRoot()`. */
export const OUTBOX_ADMIN_OPTIONS = Symbol('OUTBOX_ADMIN_OPTIONS');

/**
 * Optional REST routes over `OutboxAdminService` (stats, failed events, deliveries, replay), for a demo or an
 * internal back office. Import next to `OutboxModule`:
 * `OutboxAdminModule.forRoot({ guards: [AdminGuard], path: 'outbox' })`. Without a guard, `app.init()` fails
 * unless `allowUnguarded: true` is given: never expose these routes to the public. Only `forRoot` (no async
 * variant): the guards and path decorate the controller, so they must be known when the module is declared.
 */
@Module({})
export class OutboxAdminModule implements OnModuleInit {
  constructor(@Inject(OUTBOX_ADMIN_OPTIONS) private readonly options: OutboxAdminModuleOptions) {}

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
