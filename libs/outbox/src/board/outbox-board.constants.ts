/** Token of the options given to `OutboxBoardModule.forRoot()`. */
export const OUTBOX_BOARD_OPTIONS = Symbol('OUTBOX_BOARD_OPTIONS');
