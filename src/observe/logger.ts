import { pino, type Logger } from "pino";

export type { Logger };

/** Log levels accepted by `--log-level`. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Structured JSON logs on stdout (pino), one object per line with `level` as a label.
 * `destination` defaults to stdout; tests pass their own stream to read the lines back.
 */
export function createLogger(level: LogLevel, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { name: "platform-gateway" },
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ dest: 1, sync: true }),
  );
}

/**
 * For an event a client can cause at will (one per connection it opens): at most one log line per `intervalMs`.
 * `take()` answers whether to log now and, when so, how many events were not logged since the last line (0 for none);
 * undefined means skip this one (it is counted for the next line). `now` is the clock, ms.
 */
export function logThrottle(intervalMs: number, now: () => number = () => performance.now()): { take(): { notLogged: number } | undefined } {
  let loggedAt = -Infinity;
  let skipped = 0;
  return {
    take() {
      const t = now();
      if (t - loggedAt < intervalMs) {
        skipped++;
        return undefined;
      }
      const notLogged = skipped;
      loggedAt = t;
      skipped = 0;
      return { notLogged };
    },
  };
}
