import type * as grpc from "@grpc/grpc-js";
import type { DescMessage } from "@bufbuild/protobuf";
import { gatewayRegistry } from "../shared/protos.js";
import type { GatewayError } from "../shared/gateway-error.js";
import { checkWire } from "../shared/wire-check.js";

/**
 * Strict request decoding for the gateway's own gRPC services: what protobufjs lets through and the gateway refuses
 * before any handler runs. (A compressed-flag message on a call without grpc-encoding is refused by the server itself,
 * native/calls.ts.)
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
