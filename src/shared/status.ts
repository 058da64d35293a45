/**
 * The in-band outcome of an operation (proto `platform.Status`, docs/contract.md "Status object"): the one type and the helpers
 * every operation, front and the client use. Which failures travel in-band and which as an error status (gRPC code,
 * HTTP status, WebSocket error frame) is the route-by-outcome table in src/ops/outcomes.ts (docs/errors.md).
 */
import { Code, codeFromName, codeName } from "./code.js";
import { GatewayError } from "./gateway-error.js";

/** `{success, status, message}` as on the wire (proto platform.Status). */
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
  return { success: true, status: "OK", message };
}

/**
 * In-band failure. From an error: its code name and message (anything that is not a GatewayError goes through
 * GatewayError.from, so INTERNAL). From a code and a message: those, unchanged (e.g. a backend's own status text).
 */
export function inBandError(error: unknown): InBandStatus;
export function inBandError(code: Code, message: string): InBandStatus;
export function inBandError(error: unknown, message?: string): InBandStatus {
  if (typeof error === "number" && message !== undefined) return { success: false, status: codeName(error as Code), message };
  const err = GatewayError.from(error);
  return { success: false, status: err.codeName, message: err.rawMessage };
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
