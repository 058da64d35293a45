import * as grpc from "@grpc/grpc-js";
import type { DescMessage } from "@bufbuild/protobuf";
import { gatewayRegistry } from "../../shared/protos.js";
import type { GatewayError } from "../../shared/gateway-error.js";
import { checkWire } from "../../shared/wire-check.js";
import { wrapDecompressMessage } from "./grpc-js-internals.js";

/**
 * Strict request decoding for the gateway's own gRPC services: what grpc-js and protobufjs let through and the gateway
 * refuses before any handler runs.
 */

const DECODE_ERROR = Symbol("decodeError");

/** What a wrapped deserializer returns for bytes checkWire refuses; the bound handler answers with the error. */
export interface DecodeFailure {
  [DECODE_ERROR]: GatewayError;
}

/** The refusal carried by a request that failed checkWire, else undefined. */
export function decodeFailureOf(request: unknown): GatewayError | undefined {
  return typeof request === "object" && request !== null ? (request as Partial<DecodeFailure>)[DECODE_ERROR] : undefined;
}

/** The descriptor of a method's request when it is one of the gateway's protos (e.g. "/platform.v1.Config/Get"). */
function requestTypeOf(path: string): DescMessage | undefined {
  const [, service, method] = /^\/(.+)\/([^/]+)$/.exec(path) ?? [];
  if (!service || !method) return undefined;
  return gatewayRegistry().getService(service)?.methods.find((m) => m.name === method)?.input;
}

/**
 * `def` with a deserializer that runs checkWire first: a truncated message or invalid UTF-8 in a string field becomes
 * a DecodeFailure (INVALID_ARGUMENT naming the field) instead of a shorter or U+FFFD-filled request. Methods whose
 * request type is not one of the gateway's protos are returned as they are.
 */
export function withStrictRequest<Req, Res>(def: grpc.MethodDefinition<Req, Res>): grpc.MethodDefinition<Req, Res> {
  const type = requestTypeOf(def.path);
  if (!type) return def;
  const decode = def.requestDeserialize;
  return {
    ...def,
    requestDeserialize: (buf: Buffer) => {
      const err = checkWire(type, buf);
      return err ? ({ [DECODE_ERROR]: err } as unknown as Req) : decode(buf);
    },
  };
}

let installed: boolean | undefined;

/**
 * Make grpc-js refuse a request message whose compressed flag is set on a call without a `grpc-encoding` (or with
 * `identity`): the gRPC protocol makes that an INTERNAL error, and grpc-js 1.14 reads such a message as uncompressed.
 * grpc-js has no option for it, so this wraps `BaseServerInterceptingCall.decompressMessage` (which gets the
 * 5-byte-prefixed message and the call's encoding) once per process, through grpc-js-internals.ts. Returns false when
 * the grpc-js version has no such method (the tests in test/integration/input-hardening.test.ts and
 * grpc-js-internals.test.ts then fail, so an upgrade cannot lose this silently).
 */
export function installStrictCompressedFlag(): boolean {
  if (installed !== undefined) return installed;
  return (installed = wrapDecompressMessage(
    (original) =>
      function (this: unknown, message: Buffer, encoding: string): Promise<Buffer> {
        if (encoding === "identity" && message[0] === 1) {
          return Promise.reject({
            code: grpc.status.INTERNAL,
            details: "the request message has the compressed flag set, but the call names no grpc-encoding",
          });
        }
        return original.call(this, message, encoding);
      },
  ));
}
