import { Code, codeName, httpStatusOf } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";

/**
 * What a request's content type asks for: the Connect protocol's unary or streaming form, or gRPC-Web (binary or
 * base64 text); its messages as protobuf binary or JSON (gRPC-Web: binary only).
 */
export interface WireProtocol {
  protocol: "connect-unary" | "connect-stream" | "grpc-web";
  codec: "proto" | "json";
  /** gRPC-Web text: the body (both ways) is base64. */
  text: boolean;
  /** The response's content type. */
  contentType: string;
}

/**
 * The protocol of a `content-type` header (parameters such as `charset` ignored), or undefined for one neither protocol
 * uses (the request is then no browser RPC).
 */
export function protocolOf(contentType: string | undefined): WireProtocol | undefined {
  const mime = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  switch (mime) {
    case "application/proto":
      return { protocol: "connect-unary", codec: "proto", text: false, contentType: mime };
    case "application/json":
      return { protocol: "connect-unary", codec: "json", text: false, contentType: mime };
    case "application/connect+proto":
      return { protocol: "connect-stream", codec: "proto", text: false, contentType: mime };
    case "application/connect+json":
      return { protocol: "connect-stream", codec: "json", text: false, contentType: mime };
    case "application/grpc-web":
    case "application/grpc-web+proto":
      return { protocol: "grpc-web", codec: "proto", text: false, contentType: mime };
    case "application/grpc-web-text":
    case "application/grpc-web-text+proto":
      return { protocol: "grpc-web", codec: "proto", text: true, contentType: mime };
    default:
      return undefined;
  }
}

/** Connect's name of a code: the gRPC name in lower case, except Connect's spelling "canceled". */
export function connectCodeName(code: Code): string {
  return code === Code.CANCELLED ? "canceled" : codeName(code).toLowerCase();
}

/**
 * The HTTP status of a Connect unary error. Connect's code table gives each code the status grpc-gateway gives it
 * (`canceled` 499, `resource_exhausted` 429, unknown, internal and data loss 500, ...): the one mapping of the gateway.
 */
export const connectHttpStatus = httpStatusOf;

/** The Connect error JSON of a status (unary error body, and `error` of the end-of-stream message). */
export function connectErrorJson(code: Code, message: string): { code: string; message?: string } {
  return message === "" ? { code: connectCodeName(code) } : { code: connectCodeName(code), message };
}

/** Connect's end-of-stream message: `{}` when OK, else `{"error": ...}`. */
export function connectEndStream(code: Code, message: string): Buffer {
  return Buffer.from(JSON.stringify(code === Code.OK ? {} : { error: connectErrorJson(code, message) }));
}

/** gRPC's grpc-timeout units, in ms. */
const GRPC_UNITS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * The caller's timeout in ms from `Connect-Timeout-Ms` (at most 10 digits) or gRPC-Web's `grpc-timeout` (at most 8
 * digits and a unit), or undefined when absent. INVALID_ARGUMENT naming the header when it is malformed.
 */
export function timeoutMs(protocol: WireProtocol["protocol"], headers: Readonly<Record<string, string>>): number | undefined {
  if (protocol === "grpc-web") {
    const v = headers["grpc-timeout"];
    if (v === undefined) return undefined;
    const m = /^(\d{1,8})([HMSmun])$/.exec(v);
    if (!m) throw new GatewayError(Code.INVALID_ARGUMENT, `grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u, n), got ${JSON.stringify(echo(v, 32))}`);
    return Number(m[1]) * GRPC_UNITS[m[2]!]!;
  }
  const v = headers["connect-timeout-ms"];
  if (v === undefined) return undefined;
  if (!/^\d{1,10}$/.test(v)) throw new GatewayError(Code.INVALID_ARGUMENT, `connect-timeout-ms must be 1 to 10 digits, got ${JSON.stringify(echo(v, 32))}`);
  return Number(v);
}

/**
 * UNIMPLEMENTED when the request says its body is compressed (Connect unary `content-encoding`, Connect streaming
 * `connect-content-encoding`, gRPC-Web `grpc-encoding`) with anything but identity: the gateway offers no compression.
 */
export function compressionRefusal(protocol: WireProtocol["protocol"], headers: Readonly<Record<string, string>>): GatewayError | undefined {
  const name = protocol === "connect-unary" ? "content-encoding" : protocol === "connect-stream" ? "connect-content-encoding" : "grpc-encoding";
  const v = headers[name];
  if (v === undefined || v.trim().toLowerCase() === "identity") return undefined;
  return new GatewayError(Code.UNIMPLEMENTED, `${name} ${JSON.stringify(echo(v, 32))} is not supported: the gateway accepts identity (uncompressed) only`);
}
