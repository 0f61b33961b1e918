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
    const { guards, allowUnguarded } = this.options;
    const absent = guards === undefined || (Array.isArray(guards) && guards.length === 0);
    // Fails closed: anything but an array of guards (a lone class, a string, an object without canActivate)
    // is a mistake even with allowUnguarded, which only permits leaving guards out.
    if (!absent && !(Array.isArray(guards) && guards.every(isGuard)))
      throw new OutboxConfigurationError([messages.malformedAdminGuards(describeGuards(guards))]);
    if (absent && allowUnguarded !== true) throw new OutboxConfigurationError([messages.unguardedAdmin()]);
  }
}

/** A guard class (with `canActivate` on its prototype) or a guard instance. */
function isGuard(guard: unknown): boolean {
  if (typeof guard === 'function')
    return typeof (guard.prototype as { canActivate?: unknown } | undefined)?.canActivate === 'function';
  return typeof (guard as { canActivate?: unknown } | null)?.canActivate === 'function';
}

function describeGuards(guards: unknown): string {
  if (typeof guards === 'function') return `the class ${guards.name || '(anonymous)'} on its own`;
  if (!Array.isArray(guards)) return guards === null ? 'null' : `a ${typeof guards}`;
  const bad = guards.findIndex((g) => !isGuard(g));
  return `an array whose element ${bad} is not a guard`;
}

/** A subclass per `forRoot` call, so two apps (or paths) in one process never share route metadata. */
function guardedController(options: OutboxAdminModuleOptions): Type<OutboxAdminController> {
  class OutboxAdminRoutes extends OutboxAdminController {}
  Controller(options.path ?? 'outbox')(OutboxAdminRoutes);
  // Malformed guards are reported by onModuleInit, with the other boot problems, rather than thrown here.
  const guards = Array.isArray(options.guards) && options.guards.every(isGuard) ? options.guards : [];
  if (guards.length > 0) UseGuards(...guards)(OutboxAdminRoutes);
  return OutboxAdminRoutes;
}
