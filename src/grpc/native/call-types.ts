import type { CancelSignal } from "../../shared/signals.js";
import type { GatewayError } from "../../shared/gateway-error.js";
import type { CallMetadata } from "../../shared/metadata.js";

/**
 * The call types the native gRPC server hands its handlers: only what the gateway's handlers use. One class in
 * calls.ts implements them all; a handler sees the narrow view of its method kind.
 *
 * Ending a call: a unary or client-streaming handler resolves its reply or throws; a streaming handler calls end().
 * A GatewayError ends the call with its code and message; anything else thrown is UNKNOWN "Unknown error" (what
 * grpc-js answers for a handler that throws) and is reported to the server's onError.
 */
export interface CallBase {
  /** The full method path, e.g. "/platform.Gateway/Invoke". */
  readonly path: string;
  /** The request's custom metadata (reserved and transport headers removed, `-bin` values decoded). */
  readonly metadata: CallMetadata;
  /** The caller's deadline as epoch ms, undefined when it set none. */
  readonly deadline: number | undefined;
  /** The client's address as "host:port" ("unknown" when the socket has none). */
  readonly peer: string;
  /** The request's :authority (or Host). */
  readonly authority: string | undefined;
  /**
   * Aborted once the call is over: its stream closed (after the status, or reset by the client), or the server ended
   * it without the handler (deadline, a message limit, a serialization failure). The reason is a GatewayError
   * (CANCELLED, DEADLINE_EXCEEDED, ...). Aborted on a later tick than the event, never inside a call of the handler's.
   */
  readonly signal: AbortSignal;
  /**
   * The same event for a handler whose only listener is a backend call (the transparent proxy): aborted when `signal`
   * would be, without an AbortController (made on first use too).
   */
  readonly cancellation: CancelSignal;
  /** The status has been sent (by the handler or the server) or the stream is gone: nothing more goes out. */
  readonly ended: boolean;
  /** Trailers sent with the status, whichever way the call ends. */
  readonly trailers: CallMetadata;
  /** Send the response headers now with `metadata` (otherwise they go out, empty, before the first message). Once. */
  sendMetadata(metadata: CallMetadata): void;
}

/** A unary call: one request. The handler resolves the reply. */
export interface UnaryCall<Req> extends CallBase {
  readonly request: Req;
}

/** What streaming replies share: messages out with backpressure, then end(). */
export interface ReplyStream<Res> {
  /**
   * Send one message. Returns false once the stream's outbound buffer is over its high-water mark: wait for
   * drained() before writing more (writing on buffers without bound). Ignored (false) once the call has ended.
   */
  write(message: Res): boolean;
  /** Resolves when the outbound buffer has drained, or the call has ended (check `ended`). */
  drained(): Promise<void>;
  /** End the call: OK, or the error's code and message; `trailers` go out with it. Later calls do nothing. */
  end(status?: GatewayError): void;
}

/** Pre-framed gRPC messages out (see ServerStreamCall.framedWriter): false means wait for drained(), or the call is over. */
export interface FramedWriter {
  write(bytes: Buffer): boolean;
}

/** A server-streaming call: one request, a stream of replies. */
export interface ServerStreamCall<Req, Res> extends CallBase, ReplyStream<Res> {
  readonly request: Req;
  /**
   * Send bytes that are already gRPC messages (each with its 5-byte prefix), as they are: one Buffer encoded once
   * can go to many calls. Same backpressure as write(). Response headers go out first if they have not.
   */
  writeFramed(bytes: Uint8Array): boolean;
  /**
   * writeFramed without the call in between, for a loop that writes to thousands of calls (pub/sub's delivery, where
   * each object a write reads is a likely cache miss). Sends the response headers if they have not gone out. The
   * writer refuses (false) once the call is over; drained() is its backpressure, as for write().
   */
  framedWriter(): FramedWriter;
  /** Reset the stream (RST_STREAM CANCEL) now, dropping what is still buffered: for a client that stopped reading. */
  reset(): void;
}

/** Request messages in, with backpressure: the client's stream is held while the handler has not read them. */
export interface RequestStream<Req> {
  /**
   * The request messages in order, ending when the client half-closes or the call ends. One iteration per call.
   * While the handler has 16 messages it has not taken, no flow-control credit goes back to the client.
   */
  messages(): AsyncIterableIterator<Req>;
}

/** A client-streaming call: requests in, one reply (the handler resolves it). */
export interface ClientStreamCall<Req> extends CallBase, RequestStream<Req> {}

/** A bidi-streaming call. */
export interface BidiCall<Req, Res> extends CallBase, RequestStream<Req>, ReplyStream<Res> {}

/** How a method's messages become bytes and back (a loaded service definition's (de)serializers). */
export interface MethodCodec<Req, Res> {
  deserialize(bytes: Buffer): Req;
  serialize(message: Res): Buffer;
}

/** A method the server routes, by kind. Handler and codec are methods, so a typed handler fits the unknown slot. */
export type MethodHandler<Req = unknown, Res = unknown> = MethodCodec<Req, Res> &
  (
    | { readonly kind: "unary"; handle(call: UnaryCall<Req>): Promise<Res> }
    | { readonly kind: "serverStream"; handle(call: ServerStreamCall<Req, Res>): void | Promise<void> }
    | { readonly kind: "clientStream"; handle(call: ClientStreamCall<Req>): Promise<Res> }
    | { readonly kind: "bidi"; handle(call: BidiCall<Req, Res>): void | Promise<void> }
  );

/** A method kind. */
export type MethodKind = MethodHandler["kind"];
