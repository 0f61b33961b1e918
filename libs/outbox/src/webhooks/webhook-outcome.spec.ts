import { classifyWebhookResponse, parseRetryAfter } from './webhook-outcome';

const response = (status: number, body = '', headers: Record<string, string> = {}) =>
  ({ kind: 'response', status, statusText: '', headers: new Headers(headers), body }) as const;

describe('webhook outcomes', () => {
  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:27:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-5', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it('retries 408, 429 and 5xx, and kills other 4xx and 3xx unless retryOn4xx', () => {
    for (const status of [408, 429, 500, 503])
      expect(classifyWebhookResponse(response(status), false).status).toBe('failed');
    for (const status of [301, 400, 404, 410, 422])
      expect(classifyWebhookResponse(response(status), false).status).toBe('dead');
    expect(classifyWebhookResponse(response(400), true).status).toBe('failed');
    expect(classifyWebhookResponse(response(500, 'down', { 'retry-after': '7' }), false)).toMatchObject({
      status: 'failed',
      errorCode: 'httpStatus',
      error: 'HTTP 500: down',
      retryAfterMs: 7000,
    });
  });

  it('snoozes a 429 or 503 with a readable Retry-After (no attempt charged), capped at maxRetryAfterMs', () => {
    const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
    expect(classifyWebhookResponse(response(503, 'down', { 'retry-after': '7' }), false)).toMatchObject({
      status: 'snoozed',
      errorCode: 'retryAfter',
      retryAfterMs: 7000,
    });
    expect(
      classifyWebhookResponse(
        response(429, '', { 'retry-after': 'Wed, 21 Oct 2015 07:28:30 GMT' }),
        false,
        now,
        true,
        60_000,
      ),
    ).toMatchObject({ status: 'snoozed', retryAfterMs: 30_000 });
    expect(
      classifyWebhookResponse(response(429, '', { 'retry-after': '3600' }), false, now, true, 60_000),
    ).toMatchObject({ status: 'snoozed', retryAfterMs: 60_000 });
    // unreadable, or another status: charged as before
    expect(classifyWebhookResponse(response(429, '', { 'retry-after': 'soon' }), false).status).toBe(
      'failed',
    );
    expect(classifyWebhookResponse(response(502, '', { 'retry-after': '5' }), false).status).toBe('failed');
  });

  it('treats a 2xx JSON body with ok: false as a remote failure and keeps the receiver run id', () => {
    expect(classifyWebhookResponse(response(200, '{"ok":false,"runId":"r-9"}'), false)).toMatchObject({
      status: 'failed',
      errorCode: 'remoteReportedFailure',
      externalRunId: 'r-9',
    });
    expect(classifyWebhookResponse(response(200, '{"ok":true,"event_id":17}'), false)).toEqual({
      status: 'delivered',
      externalRunId: '17',
    });
    expect(classifyWebhookResponse(response(204, '', { 'x-run-id': 'h-1' }), false)).toEqual({
      status: 'delivered',
      externalRunId: 'h-1',
    });
    expect(classifyWebhookResponse(response(200, 'plain text'), false)).toEqual({
      status: 'delivered',
      externalRunId: null,
    });
  });

  it('names timeouts and connection errors', () => {
    expect(classifyWebhookResponse({ kind: 'timeout', timeoutMs: 50 }, false)).toMatchObject({
      status: 'failed',
      errorCode: 'timeout',
    });
    expect(classifyWebhookResponse({ kind: 'connectionError', detail: 'ECONNREFUSED' }, false)).toMatchObject(
      { status: 'failed', errorCode: 'connectionError' },
    );
  });

  it('makes what a receiver wrote printable before it reaches logs: no line breaks, ANSI escapes or bidi overrides', () => {
    const hostile = 'ok\r\n2026-12-01 ERROR forged\u001b[31m red\u202e';
    const results = [
      classifyWebhookResponse({ ...response(500, hostile), statusText: hostile }, false),
      classifyWebhookResponse(response(200, JSON.stringify({ ok: false, runId: hostile })), false),
      classifyWebhookResponse({ kind: 'connectionError', detail: hostile }, false),
    ];
    for (const result of results) {
      const text = `${'error' in result ? result.error : ''} ${('externalRunId' in result ? result.externalRunId : '') ?? ''}`;
      // eslint-disable-next-line no-control-regex -- no control character may reach the log line
      expect(text).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/);
      expect(text).toContain('\\r\\n2026-12-01 ERROR forged\\u001b[31m');
    }
    expect(classifyWebhookResponse(response(500, 'the body'), false, Date.now(), false)).toMatchObject({
      error: 'HTTP 500',
    });
  });
});
