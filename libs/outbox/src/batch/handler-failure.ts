import { OutboxHandlerTimeoutError, OutboxInvalidPayloadError } from '../errors/outbox.error';

/** How a handler's failure is recorded: its error code, and whether a retry could help. */
export function handlerFailure(error: unknown): { code: string; dead: boolean } {
  if (error instanceof OutboxHandlerTimeoutError) return { code: error.code, dead: false };
  // a stored payload does not change between attempts
  if (error instanceof OutboxInvalidPayloadError) return { code: error.code, dead: true };
  return { code: 'handlerError', dead: false };
}
