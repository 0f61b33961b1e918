import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';

/**
 * The demo's guard for the outbox admin routes: a bearer token from `DEMO_ADMIN_TOKEN` (default `demo-admin`).
 * A real app checks that the caller may operate on `request.params.tenantId`.
 */
@Injectable()
export class DemoAdminGuard implements CanActivate {
  private readonly token = process.env.DEMO_ADMIN_TOKEN ?? 'demo-admin';

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    return request.headers.authorization === `Bearer ${this.token}`;
  }
}
