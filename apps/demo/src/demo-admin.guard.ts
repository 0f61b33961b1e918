import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';

/**
 * The demo's guard for the outbox admin routes and board: a bearer token from `DEMO_ADMIN_TOKEN` (default
 * `demo-admin`), or HTTP basic auth with any user name and that token as password (so a browser can open the
 * board: it asks for them). The user name goes on `request.user`, which the board's audit log records. A real app
 * checks that the caller may operate on the tenant.
 */
@Injectable()
export class DemoAdminGuard implements CanActivate {
  private readonly token = process.env.DEMO_ADMIN_TOKEN ?? 'demo-admin';

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const request = http.getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    const authorization = request.headers.authorization ?? '';
    if (authorization === `Bearer ${this.token}`) {
      request.user = { id: 'api' };
      return true;
    }
    if (authorization.startsWith('Basic ')) {
      const [user, password] = Buffer.from(authorization.slice(6), 'base64').toString('utf8').split(':');
      if (password === this.token && user) {
        request.user = { id: user };
        return true;
      }
    }
    http
      .getResponse<{ setHeader(name: string, value: string): void }>()
      .setHeader('www-authenticate', 'Basic realm="outbox demo"');
    throw new UnauthorizedException('sign in with any user name and the demo admin token as password');
  }
}
