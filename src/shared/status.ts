/**
 * The outcome of an operation. Inside the gateway it is one shape: a GatewayError for a failure that is thrown, and
 * `Status` (a code and a message) for one that is returned, e.g. by a backend call, the invoke and pub/sub operations,
 * an invoke stream's end or the thread bridge's reply. Each front writes it in its wire shape at its edge: the in-band
 * `{success, status, message}` below (proto `platform.Status`, docs/contract.md "Status object"; toInBand is the one
 * mapping), gRPC's grpc-status and grpc-message, REST's error body, `/v1/grpc/call`'s `{error, statusCode, data}`.
 * Which failures travel in-band and which as an error status (gRPC code, HTTP status, WebSocket error frame) is the
 * route-by-outcome table in src/ops/outcomes.ts (docs/errors.md).
 */
import { Code, codeFromName, codeName } from "./code.js";
import { GatewayError } from "./gateway-error.js";

/** The gateway's one status inside: a gRPC code (OK for success) and its message. */
export interface Status {
  readonly code: Code;
  /** Error text when failed; empty on success unless the operation reports something (e.g. a count). */
  readonly message: string;
}

/** A success status with an optional message. */
export function statusOk(message = ""): Status {
  return { code: Code.OK, message };
}

/**
 * The status of anything thrown: its code and message (anything that is not a GatewayError: GatewayError.from, so
 * INTERNAL). Thrown means failed: a foreign error claiming code 0 is UNKNOWN, never a success.
 */
export function statusOf(error: unknown): Status {
  const err = GatewayError.from(error);
  return { code: err.code === Code.OK ? Code.UNKNOWN : err.code, message: err.rawMessage };
}

/** The in-band wire form of a status. */
export function toInBand(st: Status): InBandStatus {
  return { success: st.code === Code.OK, status: codeName(st.code), message: st.message };
}

/** A failed status as a GatewayError, for a front that reports it as an error; undefined for success. */
export function statusError(st: Status): GatewayError | undefined {
  return st.code === Code.OK ? undefined : new GatewayError(st.code, st.message);
}

/** `{success, status, message}` as on the wire (proto platform.Status); built from a Status by toInBand. */
export interface InBandStatus {
  /** Whether the operation succeeded. */
  success: boolean;
  /** The gRPC status code name, e.g. "OK", "INVALID_ARGUMENT", "NOT_FOUND". */
  status: string;
  /** Error text when failed; empty on success unless the operation reports something (e.g. a count). */
  message: string;
}

/** In-band success: `{success: true, status: "OK", message}`. */
export function inBandOk(message = ""): InBandStatus {
  return toInBand(statusOk(message));
}

/**
 * In-band failure. From an error: its code name and message (anything that is not a GatewayError goes through
 * GatewayError.from, so INTERNAL). From a code and a message: those, unchanged (e.g. a backend's own status text).
 */
export function inBandError(error: unknown): InBandStatus;
export function inBandError(code: Code, message: string): InBandStatus;
export function inBandError(error: unknown, message?: string): InBandStatus {
  const st = typeof error === "number" && message !== undefined ? { code: error as Code, message } : statusOf(error);
  // A failure even if it names OK (a foreign error with code 0): the wire must not claim success for it.
  return { ...toInBand(st), success: false };
}

/**
 * A failed in-band status as a GatewayError (its code from the status name; UNKNOWN for an unknown name or a
 * failure that claims "OK"), for a front or the client that reports it as an error; undefined for success.
 * `fallbackMessage` stands in for an empty message.
 */
export function inBandFailure(st: InBandStatus, fallbackMessage = ""): GatewayError | undefined {
  if (st.success) return undefined;
  const code = codeFromName(st.status) ?? Code.UNKNOWN;
  return new GatewayError(code === Code.OK ? Code.UNKNOWN : code, st.message || fallbackMessage);
}
