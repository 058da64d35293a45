import * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../shared/protos.js";
import { Code } from "../shared/code.js";
import { onAbort } from "../shared/signals.js";
import { GatewayClientError, toClientError } from "./errors.js";
import type { ResolvedClientOptions } from "./options.js";
import type { PubsubDefinition } from "../gen/gateway/io/cloudevents/v1/Pubsub.js";
import type { ConfigDefinition } from "../gen/gateway/platform/Config.js";
import type { GatewayDefinition } from "../gen/gateway/platform/Gateway.js";
import type { StateDefinition } from "../gen/gateway/platform/State.js";
import type { TriggerDefinition } from "../gen/gateway/platform/Trigger.js";

/** The gateway services the client calls, by the name the package definition gives them (generated definitions). */
interface Services {
  "platform.Gateway": GatewayDefinition;
  "platform.State": StateDefinition;
  "platform.Config": ConfigDefinition;
  "platform.Trigger": TriggerDefinition;
  "io.cloudevents.v1.Pubsub": PubsubDefinition;
}

/** The gateway services the client calls, as the package definition names them. */
export type ServiceName = keyof Services;

type MethodsOf<S extends ServiceName> = { [K in keyof Services[S] as string extends K ? never : K]: Services[S][K] };
/** A method of `S`, e.g. "SaveState". */
export type MethodOf<S extends ServiceName> = keyof MethodsOf<S> & string;
/** What a method takes, as proto-loader encodes it (the generated request type). */
export type RequestOf<S extends ServiceName, M extends MethodOf<S>> = MethodsOf<S>[M] extends { requestSerialize(value: infer Req): Buffer } ? Req : never;
/** What a method answers, as proto-loader decodes it (the generated `__Output` type). */
export type ResponseOf<S extends ServiceName, M extends MethodOf<S>> = MethodsOf<S>[M] extends { responseDeserialize(bytes: Buffer): infer Res } ? Res : never;

/** Per-call options every operation accepts. */
export interface CallOptions {
  /** Cancels the call; the promise rejects with CANCELLED. */
  signal?: AbortSignal;
  /** Deadline for this call, ms; overrides the client's `callTimeoutMs`. */
  timeoutMs?: number;
}

/**
 * One grpc-js channel shared by a generic client per gateway service, plus the `x-api-key` metadata. Translates
 * grpc-js errors into GatewayClientError where they enter.
 */
export interface Transport {
  /** Call a unary method; resolves the response object (proto-loader snake_case shape, typed from the protos). */
  unary<S extends ServiceName, M extends MethodOf<S>>(service: S, method: M, request: RequestOf<S, M>, options?: CallOptions): Promise<ResponseOf<S, M>>;
  /** Start a server-streaming call (the caller owns it). */
  /** Start a server-streaming call; `extra` entries are added to the request metadata. */
  serverStream<S extends ServiceName, M extends MethodOf<S>>(service: S, method: M, request: RequestOf<S, M>, extra?: Record<string, string>): grpc.ClientReadableStream<ResponseOf<S, M>>;
  /** Start a bidi-streaming call (the caller owns it); `timeoutMs` > 0 sets a deadline (none by default). */
  duplex<S extends ServiceName, M extends MethodOf<S>>(service: S, method: M, timeoutMs?: number): grpc.ClientDuplexStream<RequestOf<S, M>, ResponseOf<S, M>>;
  /** Fresh metadata carrying the key (when one was given). */
  metadata(): grpc.Metadata;
  /** True after close(). */
  readonly closed: boolean;
  /** Close the channel; calls in flight are cancelled. Safe to call twice. */
  close(): void;
}

function credentialsOf(tls: ResolvedClientOptions["tls"]): grpc.ChannelCredentials {
  if (tls === true) return grpc.credentials.createSsl();
  if (tls === false) return grpc.credentials.createInsecure();
  return tls;
}

/** Create the channel and the per-service clients. No connection is made until the first call. */
export function createTransport(o: ResolvedClientOptions): Transport {
  const channelOptions: grpc.ChannelOptions = {
    // The channel's own reconnect backoff follows the subscription policy, so a restarted gateway is found quickly.
    "grpc.initial_reconnect_backoff_ms": Math.max(1, o.reconnect.initialDelayMs),
    "grpc.max_reconnect_backoff_ms": Math.max(1, o.reconnect.maxDelayMs),
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    // Liveness of open calls: a connection that died silently (no FIN/RST) fails its calls within keepaliveTimeMs +
    // keepaliveTimeoutMs, and subscriptions reconnect. No PINGs without calls: the gateway's idle timeout still
    // retires an unused connection.
    "grpc.keepalive_time_ms": o.keepaliveTimeMs,
    "grpc.keepalive_timeout_ms": o.keepaliveTimeoutMs,
    "grpc.keepalive_permit_without_calls": 0,
    ...o.channelOptions,
  };
  const channel = new grpc.Channel(o.address, credentialsOf(o.tls), channelOptions);
  const pkg = gatewayPackageDefinition();
  const clients = new Map<ServiceName, grpc.Client>();
  let closed = false;

  const clientOf = (service: ServiceName): grpc.Client => {
    let c = clients.get(service);
    if (!c) {
      const Ctor = grpc.makeGenericClientConstructor(pkg[service] as grpc.ServiceDefinition, service);
      c = new Ctor(o.address, grpc.credentials.createInsecure(), { channelOverride: channel });
      clients.set(service, c);
    }
    return c;
  };

  const metadata = (): grpc.Metadata => {
    const md = new grpc.Metadata();
    if (o.apiKey !== undefined) md.set("x-api-key", o.apiKey);
    return md;
  };

  const closedError = (): GatewayClientError => new GatewayClientError(Code.CANCELLED, "the client is closed");

  return {
    get closed() {
      return closed;
    },
    metadata,
    unary<S extends ServiceName, M extends MethodOf<S>>(service: S, method: M, request: RequestOf<S, M>, options: CallOptions = {}): Promise<ResponseOf<S, M>> {
      type Res = ResponseOf<S, M>;
      if (closed) return Promise.reject(closedError());
      const { signal } = options;
      if (signal?.aborted) return Promise.reject(new GatewayClientError(Code.CANCELLED, `${service}/${method} was cancelled before it was sent`, { cause: signal.reason }));
      const timeoutMs = options.timeoutMs ?? o.callTimeoutMs;
      const callOptions: grpc.CallOptions = timeoutMs > 0 ? { deadline: Date.now() + timeoutMs } : {};
      return new Promise<Res>((resolve, reject) => {
        const fn = (clientOf(service) as unknown as Record<string, Function>)[method];
        if (typeof fn !== "function") return reject(new GatewayClientError(Code.UNIMPLEMENTED, `${service} has no method ${method}`));
        const call = fn.call(clientOf(service), request, metadata(), callOptions, (err: grpc.ServiceError | null, res: Res) => {
          unlisten();
          if (err) reject(toClientError(err));
          else resolve(res);
        }) as grpc.ClientUnaryCall;
        const unlisten = onAbort(signal, () => call.cancel());
      });
    },
    serverStream(service, method, request, extra) {
      if (closed) throw closedError();
      const fn = (clientOf(service) as unknown as Record<string, Function>)[method];
      if (typeof fn !== "function") throw new GatewayClientError(Code.UNIMPLEMENTED, `${service} has no method ${method}`);
      const md = metadata();
      for (const [k, v] of Object.entries(extra ?? {})) md.set(k, v);
      return fn.call(clientOf(service), request, md, {}) as grpc.ClientReadableStream<ResponseOf<typeof service, typeof method>>;
    },
    duplex(service, method, timeoutMs) {
      if (closed) throw closedError();
      const fn = (clientOf(service) as unknown as Record<string, Function>)[method];
      if (typeof fn !== "function") throw new GatewayClientError(Code.UNIMPLEMENTED, `${service} has no method ${method}`);
      return fn.call(clientOf(service), metadata(), timeoutMs && timeoutMs > 0 ? { deadline: Date.now() + timeoutMs } : {}) as grpc.ClientDuplexStream<
        RequestOf<typeof service, typeof method>,
        ResponseOf<typeof service, typeof method>
      >;
    },
    close() {
      if (closed) return;
      closed = true;
      for (const c of clients.values()) c.close();
      channel.close();
    },
  };
}
