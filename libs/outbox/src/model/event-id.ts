import { v7 as uuidv7 } from 'uuid';

/** The hex digits' character codes. */
const HEX = Buffer.from('0123456789abcdef', 'latin1');

/**
 * Event ids: UUIDv7 (time-ordered), so that new rows land at the right edge of the primary-key and inbox indexes
 * instead of at random pages, and inserts stay cheap as the tables grow (docs/adr/0607-event-ids-are-uuidv7.md).
 * `uuid`'s `v7` makes the 16 bytes (its clock and its counter: ids of one process increase, within a millisecond
 * too), written into a buffer held here; the text is formatted here in one string, where `uuid`'s own text is
 * twenty pieces joined and a new byte array per id (about 1 KB per id, ADR 1004's addendum of 2026-12-07).
 */
export class EventIds {
  private readonly bytes = new Uint8Array(16);
  /** The canonical text, dashes in place: `xxxxxxxx-xxxx-7xxx-xxxx-xxxxxxxxxxxx`. */
  private readonly text = Buffer.alloc(36, '-', 'latin1');

  /** A new id, as `uuid`'s `v7()` returns it. */
  next(): string {
    const { bytes, text } = this;
    uuidv7(undefined, bytes);
    let at = 0;
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) at++;
      const byte = bytes[i]!;
      text[at++] = HEX[byte >> 4]!;
      text[at++] = HEX[byte & 15]!;
    }
    return text.toString('latin1');
  }
}
