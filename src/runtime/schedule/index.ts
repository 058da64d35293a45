/**
 * Pure schedule logic shared by the embedded scheduler, the gateway's trigger validation and the Dapr-protocol test
 * sidecar: schedule parsing (6-field cron, `@every`, descriptors), Go / ISO-8601 durations, RFC 3339 times, job
 * validation and next-fire computation. No timers, no I/O.
 */
export { parseGoDuration } from "./go-duration.js";
export { addIsoDuration, parseIsoDuration, type IsoDuration } from "./iso-duration.js";
export { isSchedulableTime, MAX_GO_DURATION_MS, MAX_SCHEDULE_TIME_MS, MAX_SCHEDULE_TIME_TEXT } from "./limits.js";
export { parseRfc3339Ms } from "../../shared/rfc3339.js";
export { resolveTimeSpec, type TimeSpecKind } from "./time-spec.js";
export { parseSchedule, type Schedule } from "./schedule.js";
export { MAX_REPEATS, nextFireTime, planJob, type JobPlan } from "./job-plan.js";
