import type * as grpc from "@grpc/grpc-js";

const identity = (b: Buffer): Buffer => b;

/** A grpc-js method definition that carries raw bytes both ways (no codec), unary unless `kind` says otherwise. */
export function rawBytesMethod(path: string, kind: { requestStream?: boolean; responseStream?: boolean } = {}): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: kind.requestStream ?? false,
    responseStream: kind.responseStream ?? false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
}
