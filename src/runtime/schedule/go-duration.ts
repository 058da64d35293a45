/**
 * Go's `time.ParseDuration` syntax: an optional sign and a sequence of decimal numbers, each with an optional fraction
 * and a unit, such as `300ms`, `-1.5h` or `2h45m`. Units: `ns`, `us` (or `µs`/`μs`), `ms`, `s`, `m`, `h`. `0` alone is
 * allowed. Days and larger units are not Go units (use an ISO-8601 duration such as `P1D` instead). At most
 * 2562047h47m16.854775807s either way, as in Go.
 */

import { MAX_GO_DURATION_MS, MAX_GO_DURATION_TEXT } from "./limits.js";
import { echo } from "../../shared/echo.js";

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const TERM = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/;

/**
 * The duration in milliseconds (fractions of a millisecond kept), or an error text when `text` is not a Go duration;
 * `outOfRange` marks a well-formed duration longer than Go can hold.
 */
export function parseGoDuration(text: string): { ms: number } | { error: string; outOfRange?: true } {
  let rest = text;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "0") return { ms: 0 };
  if (rest === "") return { error: `"${echo(text)}" is not a Go duration (expected e.g. 1m30s)` };
  let ms = 0;
  while (rest !== "") {
    const m = TERM.exec(rest);
    if (!m) {
      const bad = /^[\d.]+$/.test(rest) ? `"${echo(rest)}" has no unit` : `"${echo(rest)}" is not a number followed by a unit (ns, us, ms, s, m, h)`;
      return { error: `"${echo(text)}" is not a Go duration: ${bad}` };
    }
    ms += Number(m[1]) * UNIT_MS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  // Go's Duration is int64 nanoseconds: refuse what Go (and so Dapr) cannot hold rather than schedule it here.
  if (!Number.isFinite(ms) || ms > MAX_GO_DURATION_MS) {
    return { error: `"${echo(text)}" is out of range: a Go duration is at most ${MAX_GO_DURATION_TEXT}`, outOfRange: true };
  }
  return { ms: sign * ms };
}
