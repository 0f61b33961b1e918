import { OutboxConfigurationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';

/**
 * Loads an optional peer dependency when the feature that needs it is configured, never before: an app that does
 * not use the feature neither installs nor loads the package. A missing package fails boot with the command that
 * installs it.
 */
export function loadOptionalPeer<T>(pkg: string, feature: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional peer, loaded when configured
    return require(pkg) as T;
  } catch (error) {
    if ((error as { code?: string }).code === 'MODULE_NOT_FOUND' && String(error).includes(pkg))
      throw new OutboxConfigurationError([messages.missingPeer(feature, pkg)]);
    throw error;
  }
}
