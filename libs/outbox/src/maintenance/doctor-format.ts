/** How the doctor writes its figures: counts with separators, percentages, bytes and durations as people say them. */

/** To one decimal, null kept. */
export function round(value: number | null): number | null {
  return value === null ? null : Math.round(value * 10) / 10;
}

const integer = new Intl.NumberFormat('en-US');

/** `52118` → `52,118`. */
export function count(n: number): string {
  return integer.format(Math.round(n));
}

/** `0.25` → `25 %`. */
export function percent(ratio: number): string {
  return `${Math.round(ratio * 100)} %`;
}

/** `1536` → `1.5 KiB`. */
export function bytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${Math.round(value)} bytes`;
  return `${value < 10 && !Number.isInteger(value) ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** `432` → `7 min 12 s`. */
export function duration(seconds: number | null): string {
  if (seconds === null) return 'an unknown time';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}
