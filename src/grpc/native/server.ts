import type { ServiceDefinition } from "@grpc/grpc-js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { GrpcCall, type CallContext, type OpenStream } from "./calls.js";
import type { BidiCall, ClientStreamCall, MethodHandler, MethodKind, ServerStreamCall, UnaryCall } from "./call-types.js";
import { createH2Server } from "../../h2/server.js";
import type { H2Server, H2ServerOptions, H2ServerSession, H2ServerStream, H2StreamHandler } from "../../h2/types.js";
import { readRequestHead, UNSUPPORTED_MEDIA_TYPE, UNSUPPORTED_MEDIA_TYPE_BODY, unimplementedReply } from "./wire.js";

/**
 * The gateway's gRPC server on its own HTTP/2 layer (src/h2/): services bound from loaded service definitions
 * (addService) or one path at a time (register/unregister, for the transparent proxy), handlers written against the
 * call types of call-types.ts, listen, tryShutdown/forceShutdown. A unary call costs one parse and one socket write
 * Client-observable behaviour (status codes and texts, headers, trailers) is grpc-js 1.14's, which
 * test/integration/native-grpc-server.test.ts checks against a grpc-js Server; calls.ts and wire.ts say where each
 * piece comes from.
 */

/** A method's handler as a service implementation gives it, by kind (the service definition says which). */
export type ServiceMethod =
  | ((call: UnaryCall<never>) => Promise<unknown>)
  | ((call: ServerStreamCall<never, never>) => void | Promise<void>)
  | ((call: ClientStreamCall<never>) => Promise<unknown>)
  | ((call: BidiCall<never, never>) => void | Promise<void>);

/** A service implementation: handlers by method name (or the method's original name). */
export type ServiceHandlers = Readonly<Record<string, ServiceMethod | undefined>>;

/** How a stream ended, for the gateway's connection guards. */
export interface StreamCloseInfo {
  session: H2ServerSession;
  /** RST_STREAM code (0 when both sides ended it normally). */
  code: number;
  why: string;
  /** The client reset it (a non-zero code this side did not send). */
  byClient: boolean;
}

/** Options of a NativeGrpcServer. Every field is optional; `validateNativeGrpcServerOptions` fills the defaults. */
export interface NativeGrpcServerOptions {
  /** Largest request message accepted after decompression, bytes; -1: no limit. Default 4 MiB (grpc-js's). */
  maxReceiveMessageLength?: number;
  /** Largest response message sent, bytes; -1: no limit (grpc-js's default). */
  maxSendMessageLength?: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised. Default 1000. */
  maxConcurrentStreams?: number;
  /** Largest request header list, bytes (RFC 7541 sizes). Default 65535 (node:http2's, so grpc-js's). */
  maxHeaderListSize?: number;
  /** Outbound bytes a stream buffers before write() returns false. Default 16 KiB (a node:http2 stream's highWaterMark). */
  streamHighWaterMark?: number;
  /**
   * Bound on the wait for a unary or server-streaming call's request message after its headers, ms; 0: none (the
   * default). The call then ends DEADLINE_EXCEEDED: a client that sends HEADERS and no DATA would otherwise hold the
   * stream and a concurrent-stream slot for as long as the connection lives.
   */
  messageTimeoutMs?: number;
  /** A call ended by the message timeout (the gateway counts it). */
  onMessageTimeout?(path: string): void;
  /** A new connection. */
  onSession?(session: H2ServerSession): void;
  /** A connection ended. */
  onSessionClose?(session: H2ServerSession, why: string): void;
  /**
   * A handler's event listener or one of these hooks threw while the server ran it (the call, if still open, ended
   * UNKNOWN "Unknown error"). Default: a process warning. The gateway logs it.
   */
  onError?(err: unknown, path: string): void;
  /** A stream ended (every stream, also those refused with 415 or UNIMPLEMENTED). */
  onStreamClose?(info: StreamCloseInfo): void;
  /**
   * The HTTP/2 layer's connection policy (idle timeout, keepalive, connection age, connection cap and its hook),
   * passed through as it is; each field defaults in src/h2/server-lifecycle.ts.
   */
  connections?: H2ConnectionPolicy;
  /** Serve over TLS with these Node TLS server options (ALPN h2). Default: cleartext. */
  tls?: import("node:tls").TlsOptions;
  /** The HTTP/2 layer. Default: h2-server.ts `createH2Server`. */
  transport?: (options: H2ServerOptions) => H2Server;
}

/** The connection-lifecycle fields of H2ServerOptions. */
export type H2ConnectionPolicy = Pick<
  H2ServerOptions,
  "idleTimeoutMs" | "keepaliveTimeMs" | "keepaliveTimeoutMs" | "maxConnectionAgeMs" | "maxConnectionAgeGraceMs" | "maxConnections" | "acceptBacklog" | "onConnectionRefused" | "onResetBudget" | "onConnectionError"
>;

type Required_ = Required<Omit<NativeGrpcServerOptions, "onMessageTimeout" | "onError" | "onSession" | "onSessionClose" | "onStreamClose" | "transport" | "connections" | "tls">>;

/** Fill defaults and check each numeric field; throws naming the field and the value. */
export function validateNativeGrpcServerOptions(o: NativeGrpcServerOptions): Readonly<Required_> {
  const int = (name: keyof Required_, value: number | undefined, dflt: number, min: number, max: number): number => {
    const v = value ?? dflt;
    if (!Number.isInteger(v) || v < min || v > max) throw new RangeError(`NativeGrpcServer option ${name} must be an integer from ${min} to ${max}, got ${String(value)}`);
    return v;
  };
  return Object.freeze({
    maxReceiveMessageLength: int("maxReceiveMessageLength", o.maxReceiveMessageLength, 4 * 1024 * 1024, -1, 2 ** 32 - 1),
    maxSendMessageLength: int("maxSendMessageLength", o.maxSendMessageLength, -1, -1, 2 ** 32 - 1),
    maxConcurrentStreams: int("maxConcurrentStreams", o.maxConcurrentStreams, 1000, 1, 2 ** 31 - 1),
    maxHeaderListSize: int("maxHeaderListSize", o.maxHeaderListSize, 65535, 1024, 2 ** 31 - 1),
    streamHighWaterMark: int("streamHighWaterMark", o.streamHighWaterMark, 16 * 1024, 1, 2 ** 31 - 1),
    messageTimeoutMs: int("messageTimeoutMs", o.messageTimeoutMs, 0, 0, 2 ** 31 - 1),
  });
}

/** A routed method: its handler and codec, and its path. */
type Route = MethodHandler & { readonly path: string };

/**
 * A route as an instance of one class, so every route of every server in the process has one hidden map. An object
 * spread (`{ ...method, path }`) made a new map per route: the calls' reads of `this.method.kind`, `.handle` and the
 * codec were megamorphic across methods, and code the warm-up's private gateway compiled failed its map check ("wrong
 * map") at the first call of the real one (docs/warmup.md).
 */
class RouteRecord {
  constructor(
    readonly kind: MethodKind,
    readonly handle: MethodHandler["handle"],
    readonly serialize: MethodHandler["serialize"],
    readonly deserialize: MethodHandler["deserialize"],
    readonly path: string,
  ) {}
}

function routeOf(method: MethodHandler, path: string): Route {
  return new RouteRecord(method.kind, method.handle, method.serialize, method.deserialize, path) as Route;
}

/** A gRPC server on the native HTTP/2 layer, for the gateway's handlers (see the module comment). */
export class NativeGrpcServer {
  private readonly handlers = new Map<string, Route>();
  private readonly opts: Readonly<Required_>;
  private readonly hooks: NativeGrpcServerOptions;
  private readonly ctx: CallContext;
  private transport: H2Server | undefined;
  private listening = false;
  private readonly openSessions = new Set<H2ServerSession>();
  private readonly resets = new Map<H2ServerSession, number>();
  private readonly calls = new Set<GrpcCall>();
  private shutdown = false;
  private shutdownCallbacks: Array<(error?: Error) => void> = [];

  constructor(options: NativeGrpcServerOptions = {}) {
    this.opts = validateNativeGrpcServerOptions(options);
    this.hooks = options;
    this.ctx = {
      maxReceive: this.opts.maxReceiveMessageLength,
      maxSend: this.opts.maxSendMessageLength,
      messageTimeoutMs: this.opts.messageTimeoutMs,
      onMessageTimeout: options.onMessageTimeout,
      onError: options.onError ?? ((err, path) => process.emitWarning(`gRPC handler for ${path} threw: ${(err as Error)?.stack ?? String(err)}`)),
      callClosed: (call, code, why) => {
        this.calls.delete(call);
        this.streamClosed(call.h2, code, why, call.resetByUs);
      },
    };
  }

  /**
   * Add every method of a loaded service definition (its paths and (de)serializers), as grpc-js Server.addService: a
   * method left out of `implementation` answers UNIMPLEMENTED. Throws when a path already has a handler.
   */
  addService(service: ServiceDefinition, implementation: ServiceHandlers): void {
    const keys = Object.keys(service);
    if (keys.length === 0) throw new Error("Cannot add an empty service to a server");
    for (const name of keys) {
      const attrs = service[name]!;
      const kind: MethodKind = attrs.requestStream ? (attrs.responseStream ? "bidi" : "clientStream") : attrs.responseStream ? "serverStream" : "unary";
      const fn = implementation[name] ?? (typeof attrs.originalName === "string" ? implementation[attrs.originalName] : undefined);
      const codec = { serialize: attrs.responseSerialize as (m: unknown) => Buffer, deserialize: attrs.requestDeserialize as (b: Buffer) => unknown };
      const method = fn === undefined ? unimplemented(kind, name, codec) : methodOf(kind, fn, codec);
      if (!this.register(attrs.path, method)) throw new Error(`Method handler for ${attrs.path} already provided.`);
    }
  }

  /** Route `path` to `method`; false when the path already has one. */
  register<Req, Res>(path: string, method: MethodHandler<Req, Res>): boolean {
    if (this.handlers.has(path)) return false;
    this.handlers.set(path, routeOf(method as MethodHandler, path));
    return true;
  }

  /** Remove the route of `path`; calls already running keep their handler. */
  unregister(path: string): boolean {
    return this.handlers.delete(path);
  }

  /** Listen on host:port (0: ephemeral); resolves the bound port. */
  async listen(host: string, port: number): Promise<number> {
    if (this.shutdown) throw new Error("the gRPC server is shut down");
    if (this.listening) throw new Error("the gRPC server is already listening");
    const transport = this.transportOf();
    this.listening = true;
    try {
      return await transport.listen(port, host);
    } catch (e) {
      // Nothing listens: a later listen() may try again.
      this.listening = false;
      throw e;
    }
  }

  /**
   * Serve connections on a 127.0.0.1 ephemeral port too (cleartext only), before or besides listen(): the gateway's own
   * warm-up calls (src/main/own-warmup.ts). Resolves the port and a function that stops that listener.
   */
  async listenLoopback(): Promise<{ port: number; stop(): void }> {
    if (this.shutdown) throw new Error("the gRPC server is shut down");
    const transport = this.transportOf();
    if (!transport.listenLoopback) throw new Error("the gRPC server's transport has no loopback listener");
    return transport.listenLoopback();
  }

  /** The HTTP/2 server every listener feeds, made on first use. */
  private transportOf(): H2Server {
    if (this.transport) return this.transport;
    const create = this.hooks.transport ?? createH2Server;
    const transport = create({
      ...this.hooks.connections,
      maxConcurrentStreams: this.opts.maxConcurrentStreams,
      maxHeaderListSize: this.opts.maxHeaderListSize,
      streamHighWaterMark: this.opts.streamHighWaterMark,
      ...(this.hooks.tls ? { tls: this.hooks.tls } : {}),
      onStream: (stream) => this.onStream(stream),
      onSession: (session) => {
        this.openSessions.add(session);
        try {
          this.hooks.onSession?.(session);
        } catch (e) {
          this.ctx.onError(e, "(onSession)");
        }
      },
      onSessionClose: (session, why) => {
        this.openSessions.delete(session);
        this.resets.delete(session);
        try {
          this.hooks.onSessionClose?.(session, why);
        } catch (e) {
          this.ctx.onError(e, "(onSessionClose)");
        }
        this.maybeShutdownDone();
      },
    });
    this.transport = transport;
    return transport;
  }

  /** New connections get this certificate; open ones keep theirs. Throws unless listening over TLS. */
  setSecureContext(context: import("node:tls").SecureContextOptions): void {
    if (!this.transport?.setSecureContext) throw new Error("the gRPC server is not listening over TLS");
    this.transport.setSecureContext(context);
  }

  /** Open connections. */
  get sessionCount(): number {
    return this.openSessions.size;
  }

  /** Open connections (for guards that close or destroy one). */
  get sessions(): ReadonlySet<H2ServerSession> {
    return this.openSessions;
  }

  /** Calls in progress: `bufferedBytes` for a write-stall sweep, `reset(code)` to end one. */
  get openStreams(): ReadonlySet<OpenStream> {
    return this.calls;
  }

  /** Streams of `session` the client has reset so far (RST_STREAM with a non-zero code this side did not send). */
  clientResets(session: H2ServerSession): number {
    return this.resets.get(session) ?? 0;
  }

  /**
   * Graceful shutdown (grpc-js tryShutdown): stop accepting connections, GOAWAY each one (calls on the wire finish),
   * `callback` once every connection has closed.
   */
  tryShutdown(callback: (error?: Error) => void): void {
    this.shutdown = true;
    this.shutdownCallbacks.push(callback);
    this.transport?.stopListening();
    for (const s of [...this.openSessions]) s.close();
    this.maybeShutdownDone();
  }

  /** Immediate shutdown (grpc-js forceShutdown): stop listening, destroy every connection (GOAWAY CANCEL). */
  forceShutdown(): void {
    this.shutdown = true;
    this.transport?.stopListening();
    for (const s of [...this.openSessions]) s.destroy(0x8);
    this.maybeShutdownDone();
  }

  private maybeShutdownDone(): void {
    if (!this.shutdown || this.openSessions.size > 0 || this.shutdownCallbacks.length === 0) return;
    const cbs = this.shutdownCallbacks;
    this.shutdownCallbacks = [];
    queueMicrotask(() => {
      for (const cb of cbs) cb();
    });
  }

  /** A new stream: route it (415 / UNIMPLEMENTED as grpc-js answers) and start its call. */
  private onStream(stream: H2ServerStream): H2StreamHandler {
    const head = readRequestHead(stream.takeHeaders());
    const ct = head.contentType;
    if (ct === undefined || !ct.startsWith("application/grpc")) {
      // The body goes as the stream's windows allow; end([]) ends it with no trailers and reads the request to its end.
      stream.respond(UNSUPPORTED_MEDIA_TYPE, false);
      stream.write(UNSUPPORTED_MEDIA_TYPE_BODY);
      stream.end([]);
      return this.refused(stream);
    }
    const handler = head.path === undefined ? undefined : this.handlers.get(head.path);
    if (handler === undefined) {
      stream.respond(unimplementedReply(String(head.path)), true);
      return this.refused(stream);
    }
    const call = GrpcCall.open(stream, handler, head, this.ctx);
    if (call === undefined) return this.refused(stream);
    this.calls.add(call);
    call.start();
    return call.h2Handler();
  }

  /** The handler of a stream answered at once: only its close is of interest. */
  private refused(stream: H2ServerStream): H2StreamHandler {
    return { data() {}, end() {}, drain() {}, close: (code, why) => this.streamClosed(stream, code, why, false) };
  }

  private streamClosed(stream: H2ServerStream, code: number, why: string, resetByUs: boolean): void {
    const byClient = code !== 0 && !resetByUs;
    if (byClient) this.resets.set(stream.session, (this.resets.get(stream.session) ?? 0) + 1);
    this.hooks.onStreamClose?.({ session: stream.session, code, why, byClient });
  }
}

type Codec = { serialize(m: unknown): Buffer; deserialize(b: Buffer): unknown };

/** A service implementation's function as the method of its kind. */
function methodOf(kind: MethodKind, fn: ServiceMethod, codec: Codec): MethodHandler {
  switch (kind) {
    case "unary":
      return { kind, handle: fn as (call: UnaryCall<unknown>) => Promise<unknown>, ...codec };
    case "clientStream":
      return { kind, handle: fn as (call: ClientStreamCall<unknown>) => Promise<unknown>, ...codec };
    case "serverStream":
      return { kind, handle: fn as (call: ServerStreamCall<unknown, unknown>) => void, ...codec };
    case "bidi":
      return { kind, handle: fn as (call: BidiCall<unknown, unknown>) => void, ...codec };
  }
}

/** grpc-js's answer for a method the implementation left out (server.js getDefaultHandler). */
function unimplemented(kind: MethodKind, name: string, codec: Codec): MethodHandler {
  const err = (): GatewayError => new GatewayError(Code.UNIMPLEMENTED, `The server does not implement the method ${name}`);
  const reject = async (): Promise<never> => {
    throw err();
  };
  const end = (call: { end(s: GatewayError): void }): void => call.end(err());
  return methodOf(kind, kind === "unary" || kind === "clientStream" ? reject : end, codec);
}
