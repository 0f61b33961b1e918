import { ArgumentsHost, Catch, HttpException, Inject, Logger, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { OutboxValidationError } from '../errors/outbox.error';
import { errorText } from '../errors/error-text';
import { errorPage, type BoardPageContext } from './views';
import { BOARD_HEADERS } from './board-headers';
import { boardBase, boardPath } from './board-path';
import { OUTBOX_BOARD_OPTIONS } from './outbox-board.constants';
import type { OutboxBoardModuleOptions } from './outbox-board-options.interface';

/** Where the controller leaves the page context on the request, for the error page. */
export const BOARD_CONTEXT = Symbol('outbox-board-context');

/**
 * Renders the board's errors as pages in its layout (with its headers): a guard's refusal, a tenant the operator
 * may not see (403), an event that is not there (404), bad input (400, naming the field). Anything else is 500
 * with no detail; Nest logs it.
 */
@Catch()
export class BoardExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger(BoardExceptionFilter.name);

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(OUTBOX_BOARD_OPTIONS) private readonly options: OutboxBoardModuleOptions,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<Record<string | symbol, unknown>>();
    const response = http.getResponse<unknown>();
    const ctx: BoardPageContext = (request[BOARD_CONTEXT] as BoardPageContext | undefined) ?? {
      base: boardBase(request, boardPath(this.options.path)),
      tenants: [],
      tenantId: null,
      refreshMs: 0,
      csrfToken: '',
    };
    let status = 500;
    let message = 'Something went wrong; the server log has the details.';
    if (exception instanceof OutboxValidationError) {
      status = 400;
      message = exception.message;
    } else if (exception instanceof HttpException) {
      status = exception.getStatus();
      const body = exception.getResponse();
      const detail = typeof body === 'string' ? body : (body as { message?: unknown }).message;
      // Nest's ValidationPipe answers with a list of messages
      message =
        typeof detail === 'string' ? detail : Array.isArray(detail) ? detail.join(', ') : exception.message;
    } else {
      this.logger.error(`board request failed: ${errorText(exception)}`);
    }
    const adapter = this.adapterHost.httpAdapter;
    for (const [name, value] of Object.entries(BOARD_HEADERS)) adapter.setHeader(response, name, value);
    adapter.setHeader(response, 'content-type', 'text/html; charset=utf-8');
    adapter.reply(response, errorPage({ ...ctx, tenantId: null }, status, message), status);
  }
}
