/**
 * The Nest token of the relay's clock (a `Clock`): the time its planner, claims and heartbeat decide by. Left
 * unprovided, the process's clock; unit specs provide their own.
 */
export const OUTBOX_CLOCK = Symbol('OUTBOX_CLOCK');
