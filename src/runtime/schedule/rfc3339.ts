const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 timestamp (`2025-01-31T08:00:00Z`, `2025-01-31T09:00:00.5+01:00`) as epoch ms, or undefined when
 * `text` is not one or names a date that does not exist (Feb 30, hour 24, second 60: Go's parser rejects those too).
 */
export function parseRfc3339(text: string): number | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  if (mo! < 1 || mo! > 12 || d! < 1 || h! > 23 || mi! > 59 || s! > 59) return undefined;
  const day = new Date(Date.UTC(y!, mo! - 1, d!));
  if (day.getUTCDate() !== d || day.getUTCMonth() !== mo! - 1) return undefined;
  let offsetMin = 0;
  if (m[9]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMin = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const frac = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear does not.
  const t = new Date(Date.UTC(2000, mo! - 1, d!, h!, mi!, s!, frac));
  t.setUTCFullYear(y!);
  return t.getTime() - offsetMin * 60_000;
}
