import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';

/** Options of `OutboxAdminModule.forRoot()`. */
export interface OutboxAdminModuleOptions {
  /**
   * Guards run before every route (at least one, unless `allowUnguarded`). Each sees `request.params.tenantId`
   * and must check that the caller may operate on that tenant: the routes read payloads and replay events. The
   * routes of every tenant (`consumers/:consumer/pause`, `…/resume`, `consumers/paused`) have no `tenantId`: let
   * only operators of every tenant through them.
   * Default: none (boot fails unless `allowUnguarded` is `true`).
   */
  guards?: (Type<CanActivate> | CanActivate)[];
  /** Route prefix of the routes (`/<path>/tenants/:tenantId/…`). Default: `'outbox'`. */
  path?: string;
  /** Register the routes with no guard: for a local demo only, never in production. Default: `false`. */
  allowUnguarded?: boolean;
  /** Modules that the guards' own dependencies come from. Default: none. */
  imports?: ModuleMetadata['imports'];
}
