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
