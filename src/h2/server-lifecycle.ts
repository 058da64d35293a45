import type { H2ServerOptions } from "./types.js";
import { H2Error } from "./frames.js";
import { MAX_TIMER_MS } from "../shared/timers.js";

/**
 * The connection-lifecycle defences of the native HTTP/2 server (docs/operations.md "HTTP/2 connection defences"):
 * the timers a connection runs besides its frames, and the policy of each. A session owns one ConnectionTimers and
 * tells it what happened (a socket read, the last stream closed, our SETTINGS acknowledged, a PING ACK, a header block
 * left open); the timers call back on the session (TimerHost) when a bound is reached.
 *
 * - Idle timeout (grpc-go MaxConnectionIdle, nginx http2 idle_timeout): a connection with no open stream for
 *   `idleTimeoutMs` is closed gracefully.
 * - Keepalive (grpc-go keepalive.ServerParameters Time/Timeout): after `keepaliveTimeMs` without a byte from the
 *   client, a PING; no ACK (and nothing else read) within `keepaliveTimeoutMs` ends the connection.
 * - Maximum connection age (grpc-go MaxConnectionAge/MaxConnectionAgeGrace): at the age, ±10% so connections made
 *   together do not all go at once, a graceful close; streams still open `maxConnectionAgeGraceMs` later are reset.
 * - Graceful close in two phases (RFC 9113 6.8): GOAWAY(2^31-1, NO_ERROR) and a PING, then, on its ACK (one round
 *   trip: every stream the client sent before it saw the first GOAWAY has arrived) or after DRAIN_PING_WAIT_MS, the
 *   final GOAWAY with the real last stream id. A one-phase GOAWAY refuses streams already on the wire, and the client
 *   cannot tell whether they ran.
 * - SETTINGS acknowledgement (RFC 9113 6.5.3): our SETTINGS not acknowledged within SETTINGS_ACK_TIMEOUT_MS is
 *   SETTINGS_TIMEOUT.
 * - Header block: a block continued in CONTINUATION frames must end within HEADER_BLOCK_TIMEOUT_MS; the connection
 *   can carry nothing else meanwhile (RFC 9113 6.10), so a client that dribbles one CONTINUATION at a time holds a
 *   connection and its buffers for free.
 *
 * Timers are plain setTimeout with the owner as argument (no closure per arm) and unref'd; a timer that fires early
 * for its condition (the connection read or became busy since it was armed) re-arms for the rest, so a busy connection
 * costs a timestamp per socket read, not a timer reset.
 */

/** Defaults, also in docs/operations.md. */
export const IDLE_TIMEOUT_MS = 5 * 60_000;
export const KEEPALIVE_TIME_MS = 2 * 60 * 60_000;
export const KEEPALIVE_TIMEOUT_MS = 20_000;
export const MAX_CONNECTION_AGE_GRACE_MS = 30_000;
export const MAX_CONNECTIONS = 10_000;
/** Fixed bounds (no option: a well-behaved client meets them by orders of magnitude). */
export const SETTINGS_ACK_TIMEOUT_MS = 10_000;
export const HEADER_BLOCK_TIMEOUT_MS = 10_000;
/** How long the first GOAWAY of a graceful close waits for its PING's ACK before the final one. */
export const DRAIN_PING_WAIT_MS = 1000;

/** PING payloads this side sends, told apart in the client's ACK. */
const KEEPALIVE_PING = Buffer.from("keepaliv", "latin1");
const DRAIN_PING = Buffer.from("goaway-1", "latin1");

/** The lifecycle settings of one server, defaults filled (lifecycleSettings). */
export interface LifecycleSettings {
  /** 0: off. */
  readonly idleTimeoutMs: number;
  /** 0: off. */
  readonly keepaliveTimeMs: number;
  readonly keepaliveTimeoutMs: number;
  /** 0: off. */
  readonly maxConnectionAgeMs: number;
  readonly maxConnectionAgeGraceMs: number;
  readonly settingsAckTimeoutMs: number;
  readonly headerBlockTimeoutMs: number;
}

function ms(name: string, v: number | undefined, dflt: number, min: number): number {
  const x = v ?? dflt;
  if (typeof x !== "number" || !Number.isInteger(x) || x < min || x > MAX_TIMER_MS) {
    throw new RangeError(`H2ServerOptions.${name} must be an integer from ${min} to ${MAX_TIMER_MS} (ms), got ${String(v).slice(0, 40)}`);
  }
  return x;
}

/** The options' lifecycle fields with defaults; throws a RangeError naming a bad field. */
export function lifecycleSettings(o: H2ServerOptions): LifecycleSettings {
  return Object.freeze({
    idleTimeoutMs: ms("idleTimeoutMs", o.idleTimeoutMs, IDLE_TIMEOUT_MS, 0),
    keepaliveTimeMs: ms("keepaliveTimeMs", o.keepaliveTimeMs, KEEPALIVE_TIME_MS, 0),
    keepaliveTimeoutMs: ms("keepaliveTimeoutMs", o.keepaliveTimeoutMs, KEEPALIVE_TIMEOUT_MS, 1),
    maxConnectionAgeMs: ms("maxConnectionAgeMs", o.maxConnectionAgeMs, 0, 0),
    maxConnectionAgeGraceMs: ms("maxConnectionAgeGraceMs", o.maxConnectionAgeGraceMs, MAX_CONNECTION_AGE_GRACE_MS, 0),
    settingsAckTimeoutMs: ms("settingsAckTimeoutMs", o.settingsAckTimeoutMs, SETTINGS_ACK_TIMEOUT_MS, 1),
    headerBlockTimeoutMs: ms("headerBlockTimeoutMs", o.headerBlockTimeoutMs, HEADER_BLOCK_TIMEOUT_MS, 1),
  });
}

/** What the timers do to their connection. */
export interface TimerHost {
  readonly openStreams: number;
  /** Write a PING (not an ACK) with this 8-byte payload. */
  ping(payload: Buffer): void;
  /** Start a graceful close (the first GOAWAY phase); `why` is what onSessionClose will say. */
  retire(why: string): void;
  /** The second GOAWAY phase: the final GOAWAY with the real last stream id. */
  finalGoaway(): void;
  /** End the connection now: GOAWAY `code` with `why`, every stream closed. */
  fail(code: number, why: string): void;
  /** Reset every open stream (RST_STREAM `code`). */
  resetAll(code: number, why: string): void;
}

type Timer = ReturnType<typeof setTimeout> | undefined;

function arm(ms: number, fn: (t: ConnectionTimers) => void, t: ConnectionTimers): Timer {
  const h = setTimeout(fn, Math.min(Math.max(1, ms), MAX_TIMER_MS), t);
  h.unref();
  return h;
}

function idleFired(t: ConnectionTimers): void {
  t.idleTimer = undefined;
  if (t.stopped || t.host.openStreams > 0) return; // re-armed when the last stream closes
  const left = t.cfg.idleTimeoutMs - (performance.now() - t.idleSince);
  if (left > 0) t.idleTimer = arm(left, idleFired, t);
  else t.host.retire(`idle for ${t.cfg.idleTimeoutMs} ms (idle timeout)`);
}

function keepaliveFired(t: ConnectionTimers): void {
  t.keepaliveTimer = undefined;
  if (t.stopped) return;
  const silent = performance.now() - t.lastRead;
  if (silent < t.cfg.keepaliveTimeMs) {
    t.keepaliveTimer = arm(t.cfg.keepaliveTimeMs - silent, keepaliveFired, t);
    return;
  }
  t.pingSentAt = performance.now();
  t.host.ping(KEEPALIVE_PING);
  t.keepaliveTimer = arm(t.cfg.keepaliveTimeoutMs, keepaliveTimedOut, t);
}

function keepaliveTimedOut(t: ConnectionTimers): void {
  t.keepaliveTimer = undefined;
  if (t.stopped) return;
  // Anything read since the PING proves the client alive (grpc-go's rule too): its ACK may be queued behind it.
  if (t.lastRead > t.pingSentAt) {
    t.keepaliveTimer = arm(t.cfg.keepaliveTimeMs, keepaliveFired, t);
    return;
  }
  t.host.fail(H2Error.NO_ERROR, `keepalive PING not acknowledged within ${t.cfg.keepaliveTimeoutMs} ms`);
}

function ageFired(t: ConnectionTimers): void {
  t.ageTimer = undefined;
  if (t.stopped) return;
  t.host.retire("max connection age");
  // Armed even with no stream open: the client may send one before it sees the GOAWAY.
  if (t.stopped) return;
  t.ageTimer = arm(t.cfg.maxConnectionAgeGraceMs, ageGraceOver, t);
}

function ageGraceOver(t: ConnectionTimers): void {
  t.ageTimer = undefined;
  if (t.stopped) return;
  t.host.resetAll(H2Error.CANCEL, `max connection age: stream still open ${t.cfg.maxConnectionAgeGraceMs} ms after the GOAWAY`);
}

function drainFired(t: ConnectionTimers): void {
  t.drainTimer = undefined;
  if (!t.stopped) t.host.finalGoaway();
}

function settingsFired(t: ConnectionTimers): void {
  t.settingsTimer = undefined;
  if (!t.stopped) t.host.fail(H2Error.SETTINGS_TIMEOUT, `SETTINGS not acknowledged within ${t.cfg.settingsAckTimeoutMs} ms`);
}

function blockFired(t: ConnectionTimers): void {
  t.blockTimer = undefined;
  if (!t.stopped) t.host.fail(H2Error.PROTOCOL_ERROR, `a header block was left open for ${t.cfg.headerBlockTimeoutMs} ms`);
}

/** The timers of one connection; see the file comment. Fields are the timer functions' state, not an API. */
export class ConnectionTimers {
  stopped = false;
  idleSince = performance.now();
  lastRead = performance.now();
  /** -0: a double field from the start, as performance.now() will store (FrameWriter.ackSince says why). */
  pingSentAt = -0;
  idleTimer: Timer;
  keepaliveTimer: Timer;
  ageTimer: Timer;
  drainTimer: Timer;
  settingsTimer: Timer;
  blockTimer: Timer;

  constructor(
    readonly host: TimerHost,
    readonly cfg: LifecycleSettings,
  ) {
    this.settingsTimer = arm(cfg.settingsAckTimeoutMs, settingsFired, this);
    if (cfg.idleTimeoutMs > 0) this.idleTimer = arm(cfg.idleTimeoutMs, idleFired, this);
    if (cfg.keepaliveTimeMs > 0) this.keepaliveTimer = arm(cfg.keepaliveTimeMs, keepaliveFired, this);
    if (cfg.maxConnectionAgeMs > 0) this.ageTimer = arm(cfg.maxConnectionAgeMs * (0.9 + 0.2 * Math.random()), ageFired, this);
  }

  /** Bytes arrived from the client. */
  read(): void {
    this.lastRead = performance.now();
  }

  /** The connection's last open stream closed. */
  idle(): void {
    this.idleSince = performance.now();
    if (this.idleTimer === undefined && this.cfg.idleTimeoutMs > 0 && !this.stopped) this.idleTimer = arm(this.cfg.idleTimeoutMs, idleFired, this);
  }

  /** The client acknowledged our SETTINGS. */
  settingsAcked(): void {
    clearTimeout(this.settingsTimer);
    this.settingsTimer = undefined;
  }

  /** A header block is open (HEADERS without END_HEADERS seen) or not, after each frame. */
  headerBlock(open: boolean): void {
    if (open) {
      if (this.blockTimer === undefined && !this.stopped) this.blockTimer = arm(this.cfg.headerBlockTimeoutMs, blockFired, this);
    } else if (this.blockTimer !== undefined) {
      clearTimeout(this.blockTimer);
      this.blockTimer = undefined;
    }
  }

  /** The first GOAWAY of a graceful close is written: send the PING whose ACK (or the wait) triggers the final one. */
  draining(): void {
    this.host.ping(DRAIN_PING);
    this.drainTimer = arm(DRAIN_PING_WAIT_MS, drainFired, this);
  }

  /** A PING ACK from the client (payload at buf[p], 8 bytes). */
  pingAck(buf: Buffer, p: number): void {
    if (this.stopped) return;
    if (buf.compare(DRAIN_PING, 0, 8, p, p + 8) === 0) {
      if (this.drainTimer === undefined) return;
      clearTimeout(this.drainTimer);
      this.drainTimer = undefined;
      this.host.finalGoaway();
    } else if (buf.compare(KEEPALIVE_PING, 0, 8, p, p + 8) === 0 && this.pingSentAt > 0) {
      this.pingSentAt = 0;
      clearTimeout(this.keepaliveTimer);
      this.keepaliveTimer = this.cfg.keepaliveTimeMs > 0 ? arm(this.cfg.keepaliveTimeMs, keepaliveFired, this) : undefined;
    }
    // An ACK of a PING this side never sent is ignored (RFC 9113 6.7 says nothing of it; it costs a compare).
  }

  /** The connection is gone: every timer cleared. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.idleTimer);
    clearTimeout(this.keepaliveTimer);
    clearTimeout(this.ageTimer);
    clearTimeout(this.drainTimer);
    clearTimeout(this.settingsTimer);
    clearTimeout(this.blockTimer);
  }
}
