import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';
import type { OutboxDoctorThresholds } from '../model/outbox-doctor-report.interface';

/** The HTTP request as the app's guards left it (express or fastify); `user` is what an auth guard usually sets. */
export interface OutboxBoardRequest {
  headers: Record<string, string | string[] | undefined>;
  user?: unknown;
  [key: string]: unknown;
}

/** The tenants an operator may see: a list of tenant ids, or `'all'`. */
export type OutboxBoardTenants = readonly string[] | 'all';

/** Options of `OutboxBoardModule.forRoot()`. */
export interface OutboxBoardModuleOptions {
  /** Route prefix of the board's pages (`/<path>/t/:tenantId/…`). Default: `'outbox/board'`. */
  path?: string;
  /**
   * Guards run before every page, asset and action (at least one, unless `allowUnguarded`). The board shows
   * payloads and replays events: authenticate the operator here. Default: none (boot fails unless
   * `allowUnguarded` is `true`).
   */
  guards?: (Type<CanActivate> | CanActivate)[];
  /**
   * The tenants the operator behind a request may see, called on every request after the guards: a list of
   * tenant ids, or `'all'`. A tenant not listed answers 403, on every page and action. Default: none with
   * `tenancy: 'multi'` (boot fails without it); the single tenant with `tenancy: 'single'`.
   */
  tenants?: (request: OutboxBoardRequest) => OutboxBoardTenants | Promise<OutboxBoardTenants>;
  /**
   * Who acts, for the audit log, from the request as the guards left it. Default: `request.user`'s `id`,
   * `username`, `email` or `name` (the first that is a string or number), else `'anonymous'`.
   */
  actor?: (request: OutboxBoardRequest) => string;
  /** Serve the board with no guard: for a local demo only, never in production. Default: `false`. */
  allowUnguarded?: boolean;
  /** How often the open pages refresh their live parts, in ms (0: never). Default: `5000`. */
  refreshMs?: number;
  /**
   * Sum this instance's delivery outcomes per tenant, consumer and minute into `outbox_activity` for the board's
   * chart, flushed every `activityFlushMs`. Import the board (with this on) in every process that relays.
   * Default: `true`.
   */
  recordActivity?: boolean;
  /** How often the activity summed in memory is written, in ms. Default: `5000`. */
  activityFlushMs?: number;
  /** Thresholds of the doctor's checks on the Database page (docs/doctor.md). Default: the doctor's own. */
  doctor?: OutboxDoctorThresholds;
  /** Modules that the guards' own dependencies come from. Default: none. */
  imports?: ModuleMetadata['imports'];
}
