import type { CanActivate, Type } from '@nestjs/common';
import { messages } from '../errors/outbox.messages';

/** The options of a feature module that serves HTTP routes behind the app's guards (admin routes, board). */
export interface GuardedRoutesOptions {
  guards?: (Type<CanActivate> | CanActivate)[];
  allowUnguarded?: boolean;
}

/**
 * The boot problems of a module's `guards` option, in one check for every module that serves HTTP. Fails closed:
 * anything but a non-empty array of guard classes or instances (a lone class, null, a string, an object without
 * `canActivate`) is a mistake even with `allowUnguarded`, which only permits leaving guards out (absent or `[]`).
 */
export function guardProblems(
  owner: string,
  options: GuardedRoutesOptions,
  unguarded: () => string,
): string[] {
  const { guards, allowUnguarded } = options;
  const absent = guards === undefined || (Array.isArray(guards) && guards.length === 0);
  if (absent) return allowUnguarded === true ? [] : [unguarded()];
  if (!Array.isArray(guards)) return [messages.malformedGuards(owner, guards, null)];
  const bad = guards.findIndex((guard) => !isGuard(guard));
  return bad === -1 ? [] : [messages.malformedGuards(owner, guards, bad)];
}

/**
 * The guards to put on the routes. While the option is wrong (boot then fails with `guardProblems`), a guard that
 * refuses every request, so that no path through a failed check serves the routes unguarded.
 */
export function routeGuards(options: GuardedRoutesOptions): (Type<CanActivate> | CanActivate)[] {
  if (guardProblems('', options, () => '').length > 0) return [REFUSE_ALL];
  return options.guards ?? [];
}

/** A guard class (with `canActivate` on its prototype) or a guard instance. */
function isGuard(guard: unknown): boolean {
  if (typeof guard === 'function')
    return typeof (guard.prototype as { canActivate?: unknown } | undefined)?.canActivate === 'function';
  return typeof (guard as { canActivate?: unknown } | null)?.canActivate === 'function';
}

const REFUSE_ALL: CanActivate = { canActivate: () => false };
