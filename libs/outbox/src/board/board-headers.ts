import { applyDecorators, Header } from '@nestjs/common';

/**
 * The Content-Security-Policy of every board response: only the board's own stylesheet and script, no inline
 * script or style, no frames, forms posting only to the app itself.
 */
export const BOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** The security headers sent with every board response. */
export const BOARD_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': BOARD_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

/** Content type and security headers of a board response. */
export function BoardResponse(contentType: string): MethodDecorator {
  return applyDecorators(
    Header('content-type', contentType),
    ...Object.entries(BOARD_HEADERS).map(([name, value]) => Header(name, value)),
  );
}
