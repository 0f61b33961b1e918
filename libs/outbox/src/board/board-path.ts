/** The board's route prefix without slashes at either end. */
export function boardPath(path: string | undefined): string {
  return (path ?? 'outbox/board').replace(/^\/+|\/+$/g, '');
}

/**
 * The board's root URL path as the browser sees it, taken from the request (so an app's global prefix, e.g.
 * `/api`, is kept in every link): the part of the URL up to and including the board's prefix.
 */
export function boardBase(request: unknown, path: string): string {
  const r = request as { originalUrl?: string; url?: string };
  const url = (r.originalUrl ?? r.url ?? '').split('?')[0]!;
  const marker = `/${path}`;
  let at = url.indexOf(`${marker}/`);
  if (at < 0 && url.endsWith(marker)) at = url.length - marker.length;
  return at < 0 ? marker : url.slice(0, at + marker.length);
}
