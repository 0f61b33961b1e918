import {
  CLAIM_NEW_NAME,
  claimNewText,
  dueTenants,
  FAN_OUT_NAME,
  fanOutText,
  outboxNames,
  handlerContext,
  transactionNow,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import type { ProbedStatement } from '../../tools/round-trip-probe';

export { RoundTripProbe, type ProbedStatement } from '../../tools/round-trip-probe';

/** The outbox's names in the default schema, where the probed specs run. */
const NAMES = outboxNames();

/** The text the relay sends for a statement, whatever its values. */
const textOf = (statement: SqlStatement): string => statement.text;

/** Any claim positions: the scan's text is the same whatever they are. */
const POSITIONED = { tenants: [], seqs: [], server: '', leasesSince: null };

/**
 * The relay's statements a spec looks for in what a probe saw, told apart by the library's own statement texts
 * and names rather than by patterns over SQL, so that a spec follows the statements when they change.
 */
export const relayStatement = {
  /** The claim of new events (the fan-out or the lean claim, named or not), of `tenantId` when given. */
  claim: (s: ProbedStatement, tenantId?: string): boolean =>
    (s.text === fanOutText(NAMES) || s.text === claimNewText(NAMES)) &&
    (tenantId === undefined || s.values[0] === tenantId),
  /** The fan-out (not the lean claim), named or not. */
  fanOut: (s: ProbedStatement): boolean => s.text === fanOutText(NAMES),
  /** A name the fan-out runs under (one per generation of a connection's named statements). */
  fanOutName: (name: string | undefined): name is string => name?.startsWith(`${FAN_OUT_NAME}_`) === true,
  /** A name the lean claim of new events runs under (`claimNewEvents`). */
  claimNewName: (name: string | undefined): name is string => name?.startsWith(`${CLAIM_NEW_NAME}_`) === true,
  /** The scan for tenants with due work: its two-argument form, or the one with the claim positions. */
  dueTenantScan: (s: ProbedStatement): boolean =>
    s.text === textOf(dueTenants(NAMES, 1, null)) ||
    s.text === textOf(dueTenants(NAMES, 1, null, POSITIONED)),
  /** The database's clock read beside a positioned scan (the next scan's `leasesSince`). */
  scanClock: (s: ProbedStatement): boolean => s.text === textOf(transactionNow()),
  /** A handler's first statement: reads the context the previous handler left and sets the batch's again. */
  handlerContext: (s: ProbedStatement): boolean => s.text === textOf(handlerContext('setting', 'tenant', 1)),
};
