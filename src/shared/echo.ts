/**
 * Bounding caller input that an error message repeats. A message that quotes its input whole lets one caller make
 * every error as large as the request (a 1 MiB name became a 1 MiB REST body, and a gRPC status message so large
 * that grpc-js's trailer broke the HTTP/2 connection for the calls sharing it).
 */

/** How many characters of one input value an error message repeats. */
export const MAX_ECHO_CHARS = 256;

/**
 * The longest error message the gateway sends, whatever it quotes: a backstop for messages that embed more than one
 * value or text from a foreign error. Well below HTTP/2 header limits, since grpc-js sends it as `grpc-message`.
 */
export const MAX_ERROR_MESSAGE_CHARS = 1024;

/**
 * `value` as an error message may quote it: strings longer than `max` characters are cut and end with
 * "…(N more characters)"; anything else goes through String() first. Never splits a surrogate pair.
 */
export function echo(value: unknown, max: number = MAX_ECHO_CHARS): string {
  const s = typeof value === "string" ? value : String(value);
  if (s.length <= max) return s;
  let cut = max;
  // Keep a high surrogate with its low surrogate: cut before the pair.
  const last = s.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  return `${s.slice(0, cut)}…(${s.length - cut} more characters)`;
}
