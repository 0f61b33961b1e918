import { randomBytes, timingSafeEqual } from 'node:crypto';
import {
  ForbiddenException,
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Observable } from 'rxjs';
import type { OutboxBoardRequest } from './outbox-board-options.interface';

/** The form field that carries the token. */
export const CSRF_FIELD = '_csrf';

/** Where the interceptor leaves this browser's token on the request, for the forms of the page. */
export const BOARD_CSRF_TOKEN = Symbol('outbox-board-csrf-token');

/** Over HTTPS the `__Host-` name: a browser keeps it only from this origin, so a sibling site cannot plant one. */
const COOKIE = 'outbox-board-csrf';
const HOST_COOKIE = `__Host-${COOKIE}`;
/** 32 random bytes, base64url. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const REFUSED = 'The board takes actions only from its own pages: reload the page and try again.';

interface CsrfRequest extends OutboxBoardRequest {
  method: string;
  body?: unknown;
  secure?: boolean;
  protocol?: string;
  [BOARD_CSRF_TOKEN]?: string;
}

/**
 * The board's protection against forged posts (CSRF), on every route after the app's guards: a double-submit
 * token. A board page read with no token cookie sets one (random, HttpOnly, SameSite=Strict, a browser session
 * long) and every form carries the same value in a hidden field. Any other method than GET, HEAD and OPTIONS is
 * refused (403) unless its field equals its cookie (compared in constant time), and also when `Sec-Fetch-Site`
 * or `Origin` names another site. A forged post has no way to the token: it cannot read the board's pages, and
 * the cookie is not sent with a cross-site request. Why a double-submit cookie, not a token tied to the app's
 * session: docs/adr/0808-board-forms-carry-a-double-submit-token.md.
 */
@Injectable()
export class BoardCsrfInterceptor implements NestInterceptor {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest<CsrfRequest>();
    if (SAFE_METHODS.has(request.method)) this.issue(request, http.getResponse<unknown>());
    else {
      checkSameOrigin(request);
      checkToken(request);
    }
    return next.handle();
  }

  /** This browser's token: the one its cookie holds, or a new one set in a cookie with the response. */
  private issue(request: CsrfRequest, response: unknown): void {
    const secure = isSecure(request);
    const name = secure ? HOST_COOKIE : COOKIE;
    const [held, ...more] = cookieValues(request, name);
    let token = held;
    if (token === undefined || more.length > 0 || !TOKEN.test(token)) {
      token = randomBytes(32).toString('base64url');
      const attributes = `Path=/; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
      this.adapterHost.httpAdapter.appendHeader(response, 'set-cookie', `${name}=${token}; ${attributes}`);
    }
    request[BOARD_CSRF_TOKEN] = token;
  }
}

/** Refuses a post whose field is not this browser's token: missing, another browser's, or a cookie given twice. */
function checkToken(request: CsrfRequest): void {
  const cookies = cookieValues(request, isSecure(request) ? HOST_COOKIE : COOKIE);
  const field = (request.body as Record<string, unknown> | undefined)?.[CSRF_FIELD];
  const cookie = cookies.length === 1 ? cookies[0]! : '';
  if (
    !TOKEN.test(cookie) ||
    typeof field !== 'string' ||
    !TOKEN.test(field) ||
    !timingSafeEqual(Buffer.from(cookie), Buffer.from(field))
  )
    throw new ForbiddenException(REFUSED);
  request[BOARD_CSRF_TOKEN] = cookie;
}

/**
 * Refuses a post a browser says comes from another site, in `Sec-Fetch-Site` or `Origin`. `Origin: null` and no
 * header at all pass on to the token (the board's own pages, with `referrer-policy: no-referrer`, send null).
 */
function checkSameOrigin(request: CsrfRequest): void {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string' && site !== 'same-origin') throw new ForbiddenException(REFUSED);
  const origin = request.headers.origin;
  const host = request.headers.host;
  if (typeof origin === 'string' && origin !== 'null' && typeof host === 'string') {
    let originHost: string | null;
    try {
      originHost = new URL(origin).host;
    } catch {
      originHost = null;
    }
    if (originHost !== host) throw new ForbiddenException(REFUSED);
  }
}

/** Every value the `Cookie` header gives `name` (a planted cookie of another path or domain comes as a second). */
function cookieValues(request: CsrfRequest, name: string): string[] {
  const header = request.headers.cookie;
  const values: string[] = [];
  for (const pair of (Array.isArray(header) ? header.join(';') : (header ?? '')).split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) values.push(pair.slice(at + 1).trim());
  }
  return values;
}

/** HTTPS as the app sees it (express's `secure` honours its `trust proxy` setting; fastify's `protocol`). */
function isSecure(request: CsrfRequest): boolean {
  return request.secure === true || request.protocol === 'https';
}
