import { invalidArgument, type GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { parseGoDuration } from "./go-duration.js";
import { addIsoDuration, parseIsoDuration } from "./iso-duration.js";
import { isSchedulableTime, MAX_SCHEDULE_TIME_TEXT } from "./limits.js";
import { parseRfc3339Ms } from "../../shared/rfc3339.js";

/** How a due_time or ttl was written. */
export type TimeSpecKind = "timestamp" | "duration" | "iso8601";

/**
 * Resolve a due_time or ttl as Dapr does: an RFC 3339 timestamp, else a Go duration from `base`, else an ISO-8601
 * duration from `base`. Returns epoch ms, or an INVALID_ARGUMENT error naming `field` (negative durations included,
 * and any time past MAX_SCHEDULE_TIME_MS: the scheduler cannot hold it).
 */
export function resolveTimeSpec(field: string, text: string, base: number): { at: number; kind: TimeSpecKind } | { error: GatewayError } {
  const r = resolve(field, text, base);
  if ("at" in r && !isSchedulableTime(r.at)) {
    return { error: invalidArgument(field, `"${echo(text)}" is past ${MAX_SCHEDULE_TIME_TEXT}, the latest time the scheduler can hold`) };
  }
  return r;
}

function resolve(field: string, text: string, base: number): { at: number; kind: TimeSpecKind } | { error: GatewayError } {
  const ts = parseRfc3339Ms(text);
  if (ts !== undefined) return { at: ts, kind: "timestamp" };
  const go = parseGoDuration(text);
  if ("ms" in go) {
    if (go.ms < 0) return { error: invalidArgument(field, `"${echo(text)}" is a negative duration`) };
    return { at: base + go.ms, kind: "duration" };
  }
  if (go.outOfRange) return { error: invalidArgument(field, go.error) };
  const iso = parseIsoDuration(text);
  if (iso) return { at: addIsoDuration(base, iso), kind: "iso8601" };
  return {
    error: invalidArgument(
      field,
      `"${echo(text)}" is neither an RFC 3339 timestamp (e.g. 2030-01-31T08:00:00Z), a Go duration (e.g. 1m30s) nor an ISO-8601 duration (e.g. PT1M30S)`,
    ),
  };
}
