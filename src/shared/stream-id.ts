/**
 * Stream positions as numbers. A Redis stream entry id `<ms>-<n>` whose `n` stays below STREAM_ID_SPAN (the redis
 * runtime's publish script makes sure of it) maps one to one onto the number `ms * STREAM_ID_SPAN + n`, which keeps
 * the order of the ids and is exact in a double until the year 2248. The positions the web hub hands out on the
 * redis runtime are these ids, the same text on every replica.
 */
export const STREAM_ID_SPAN = 1024;

const STREAM_ID = /^(\d{1,16})-(\d{1,4})$/;

/** The entry id of a position number. */
export function streamIdOf(seq: number): string {
  const n = seq % STREAM_ID_SPAN;
  return `${(seq - n) / STREAM_ID_SPAN}-${n}`;
}

/** The position number of an entry id, or undefined when the text is not one this scheme issues. */
export function seqOfStreamId(text: string): number | undefined {
  const m = STREAM_ID.exec(text);
  if (!m) return undefined;
  const ms = Number(m[1]);
  const n = Number(m[2]);
  if (n >= STREAM_ID_SPAN) return undefined;
  const seq = ms * STREAM_ID_SPAN + n;
  return Number.isSafeInteger(seq) ? seq : undefined;
}
