/**
 * The values of a label whose set is not the operator's to bound (tenants, tenant-named subscriptions), capped:
 * the first `max` values seen by this instance keep their own, every later one gets the overflow value its
 * caller names. One per metrics instance: two apps in one process do not share what they have seen.
 */
export class CappedLabel {
  private readonly seen = new Set<string>();

  constructor(private readonly max: number) {}

  /** `value` if it is one of the first `max` seen, otherwise `overflow`. */
  of(value: string, overflow: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.max) return overflow;
    this.seen.add(value);
    return value;
  }
}
