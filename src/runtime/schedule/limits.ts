/**
 * What the scheduler can represent. Every time a job holds (first and next fire time, expiry) is an epoch-ms number
 * that must format as an RFC 3339 timestamp with a four-digit year, because get and list report it as one and a
 * client must be able to send it back as a due_time. Anything later is refused when the job is scheduled, naming the
 * field and this limit, so no stored job can hold a time that breaks formatting, ordering or timers.
 */

/** The latest time a job may hold: 9999-12-31T23:59:59.999Z (the last RFC 3339 instant with a four-digit year). */
export const MAX_SCHEDULE_TIME_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** MAX_SCHEDULE_TIME_MS as text, for error messages. */
export const MAX_SCHEDULE_TIME_TEXT = "9999-12-31T23:59:59.999Z";

/**
 * The longest Go duration: Go's time.Duration is an int64 of nanoseconds, so `time.ParseDuration` (and Dapr) refuse
 * anything above 2562047h47m16.854775807s.
 */
// eslint-disable-next-line no-loss-of-precision -- Go's exact bound as written; comparisons use the nearest double
export const MAX_GO_DURATION_MS = 9_223_372_036_854.775807;

/** MAX_GO_DURATION_MS as Go writes it, for error messages. */
export const MAX_GO_DURATION_TEXT = "2562047h47m16.854775807s";

/** Whether `t` (epoch ms) is a time a job may hold: a finite number no later than MAX_SCHEDULE_TIME_MS. */
export function isSchedulableTime(t: number): boolean {
  return Number.isFinite(t) && t <= MAX_SCHEDULE_TIME_MS && t >= -MAX_SCHEDULE_TIME_MS;
}
