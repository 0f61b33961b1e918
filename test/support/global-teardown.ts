import { CHILD_REGISTER_ENV, removeChildrenBuild } from './children-build';

/**
 * Drops the template database and stops the embedded PostgreSQL started by global-setup (if any); removes the
 * children's build.
 */
export default async function globalTeardown(): Promise<void> {
  const register = process.env[CHILD_REGISTER_ENV];
  if (register) removeChildrenBuild(register);
  const state = globalThis as {
    __outboxTemplate__?: { drop(): Promise<void> };
    __outboxDatabase__?: { stop(): Promise<void> };
  };
  try {
    await state.__outboxTemplate__?.drop();
  } finally {
    await state.__outboxDatabase__?.stop();
  }
}
