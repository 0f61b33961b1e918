import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { TENANTS } from './outbox-fixture';

/** Operators by the `x-operator` header: the guard puts them on `request.user`, as an auth guard would. */
@Injectable()
export class OperatorGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string>; user?: unknown }>();
    const name = request.headers['x-operator'];
    if (name !== 'alice' && name !== 'root') return false;
    request.user = { id: name };
    return true;
  }
}

/** The board's `tenants` option for those operators: root sees every tenant, alice the first of `TENANTS` only. */
export const tenantsOf = (request: { user?: unknown }) =>
  (request.user as { id: string }).id === 'root' ? ('all' as const) : [TENANTS[0]];

/**
 * Opens a board page as an operator's browser does (as `operator`): the CSRF cookie the board sets (`name=value`)
 * and the token its forms carry.
 */
export async function boardFormSession(
  pageUrl: string,
  operator = 'alice',
): Promise<{ cookie: string; token: string }> {
  const response = await fetch(pageUrl, { headers: { 'x-operator': operator } });
  const cookie =
    response.headers
      .getSetCookie()
      .map((c) => c.split(';')[0]!)
      .find((c) => c.startsWith('outbox-board-csrf=')) ?? '';
  const token = /name="_csrf" value="([^"]*)"/.exec(await response.text())?.[1] ?? '';
  return { cookie, token };
}
