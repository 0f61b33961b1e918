const ERROR_TEXT_MAX = 2000;

/**
 * `Error: message` for errors, `String(x)` for anything else thrown; bounded in length. Total: a value whose
 * `String()`, `name` or `message` throws (`Object.create(null)`, a throwing `toString` or getter, a revoked
 * Proxy) still gives a text, so one handler's rejection value can never fail the code that records it.
 */
export function errorText(error: unknown): string {
  let isError = false;
  try {
    isError = error instanceof Error;
  } catch {
    // a revoked Proxy: not inspectable at all
  }
  if (isError) {
    // read inside printable(): `name` and `message` may be getters that throw
    const e = error as Error;
    return boundedText(
      `${printable(() => e.name, 'Error')}: ${printable(() => e.message, '(unprintable message)')}`,
    );
  }
  return boundedText(`thrown non-error: ${printable(() => error, '(unprintable value)')}`);
}

/** `String(read())`, or `fallback` when reading or converting throws (or gives no string). */
function printable(read: () => unknown, fallback: string): string {
  try {
    const text = String(read());
    return typeof text === 'string' ? text : fallback;
  } catch {
    try {
      // Object.prototype.toString reads Symbol.toStringTag, which may throw too
      return `${Object.prototype.toString.call(read())} ${fallback}`;
    } catch {
      return fallback;
    }
  }
}

/** `text`, cut to the length an error column keeps. */
export function boundedText(text: string): string {
  return text.length > ERROR_TEXT_MAX ? `${text.slice(0, ERROR_TEXT_MAX)}…` : text;
}
