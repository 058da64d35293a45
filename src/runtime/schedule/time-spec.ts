import { invalidArgument, type GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { parseGoDuration } from "./go-duration.js";
import { addIsoDuration, parseIsoDuration } from "./iso-duration.js";
import { isSchedulableTime, MAX_GO_DURATION_MS, MAX_GO_DURATION_TEXT, MAX_SCHEDULE_TIME_TEXT } from "./limits.js";
import { parseRfc3339Ms } from "../../shared/rfc3339.js";

/** How a due_time or ttl was written. */
export type TimeSpecKind = "timestamp" | "duration" | "iso8601";

/**
 * Resolve a due_time or ttl as Dapr's Scheduler does (go-etcd-cron `builder.go` parsePointInTime): an RFC 3339
 * timestamp (Go's `time.Parse(time.RFC3339, ...)`: upper-case `T` and `Z` only), else a Go duration from `base`, else
 * an ISO-8601 duration from `base` (whole numbers only, see iso-duration.ts). Returns epoch ms, or an INVALID_ARGUMENT
 * error naming `field` for everything the Scheduler refuses, and, stricter on every runtime, negative durations and any
 * time past MAX_SCHEDULE_TIME_MS (the scheduler cannot hold it).
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
  if (ts !== undefined) {
    // The shared parser takes RFC 3339's lower-case "t" and "z" (the CloudEvent time does); Go's does not.
    if (/[tz]/.test(text)) {
      return { error: invalidArgument(field, `"${echo(text)}" has a lower-case "t" or "z": write an RFC 3339 time with upper-case T and Z (e.g. 2030-01-31T08:00:00Z), as Dapr's Scheduler reads it`) };
    }
    return { at: ts, kind: "timestamp" };
  }
  const go = parseGoDuration(text);
  if ("ms" in go) {
    if (go.ms < 0) return { error: invalidArgument(field, `"${echo(text)}" is a negative duration`) };
    return { at: base + go.ms, kind: "duration" };
  }
  if (go.outOfRange) return { error: invalidArgument(field, go.error) };
  const iso = parseIsoDuration(text);
  if (iso) {
    // kit adds the time part as a Go time.Duration: longer would overflow there, so it is refused everywhere.
    if (iso.ms > MAX_GO_DURATION_MS) {
      return { error: invalidArgument(field, `"${echo(text)}" is out of range: the hours, minutes and seconds of an ISO-8601 duration are at most ${MAX_GO_DURATION_TEXT} in all (a Go duration); count longer times in days (D)`) };
    }
    return { at: addIsoDuration(base, iso), kind: "iso8601" };
  }
  if (/^P.*\d[.,]\d/.test(text)) {
    return { error: invalidArgument(field, `"${echo(text)}": an ISO-8601 duration takes whole numbers only, as Dapr's Scheduler reads it (write PT1M30S, or a Go duration such as 1.5s)`) };
  }
  return {
    error: invalidArgument(
      field,
      `"${echo(text)}" is neither an RFC 3339 timestamp (e.g. 2030-01-31T08:00:00Z), a Go duration (e.g. 1m30s) nor an ISO-8601 duration (e.g. PT1M30S)`,
    ),
  };
}
