/** A statement ready for `queryRunner.query(text, values)`. */
export interface SqlStatement {
  text: string;
  values: unknown[];
  /**
   * Set on a statement the relay may run as a server-side prepared statement (see `OutboxStore` and
   * `PREPARED_STATEMENTS`): its name and the types of its parameters. Only for statements whose generic plan
   * does not depend on table sizes (checked by `prepared-statements.e2e-spec.ts`).
   */
  prepared?: PreparedForm;
}

/** How a statement is prepared on the server: `prepare <name>(<types>) as <text>`. */
export interface PreparedForm {
  name: string;
  types: readonly string[];
}
