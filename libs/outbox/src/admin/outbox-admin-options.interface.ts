import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';

/** Options of `OutboxAdminModule.forRoot()`. */
export interface OutboxAdminModuleOptions {
  /**
   * Guards run before every route (at least one, unless `allowUnguarded`). Each sees `request.params.tenantId`
   * and must check that the caller may operate on that tenant: the routes read payloads and replay events.
   */
  guards?: (Type<CanActivate> | CanActivate)[];
  /** Route prefix. Default `outbox` (routes under `/outbox/tenants/:tenantId/…`). */
  path?: string;
  /** Register the routes with no guard at all. Default false; for a local demo only, never in production. */
  allowUnguarded?: boolean;
  /** Modules that the guards' own dependencies come from. */
  imports?: ModuleMetadata['imports'];
}
