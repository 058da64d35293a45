import * as grpc from "@grpc/grpc-js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { abortable, onAbort, type CancelSignal } from "../../shared/signals.js";
import type { DaprDefinition } from "../../gen/dapr/dapr/proto/runtime/v1/Dapr.js";
import { daprService } from "./protos.js";

/** The methods of `dapr.proto.runtime.v1.Dapr` (generated from @dapr/dapr's protos), without the index signature. */
type DaprMethods = { [K in keyof DaprDefinition as string extends K ? never : K]: DaprDefinition[K] };
/** A `Dapr` method name, e.g. "GetState". */
export type DaprMethod = keyof DaprMethods & string;
/** What a `Dapr` method takes, as proto-loader encodes it (generated type). */
export type DaprRequest<M extends DaprMethod> = Parameters<DaprMethods[M]["requestSerialize"]>[0];
/** What a `Dapr` method answers, as proto-loader decodes it (generated `__Output` type). */
export type DaprResponse<M extends DaprMethod> = ReturnType<DaprMethods[M]["responseDeserialize"]>;

/** How the adapter reaches daprd. */
export interface DaprConnectionOptions {
  /** Sidecar host. */
  host: string;
  /** Sidecar gRPC port ($DAPR_GRPC_PORT). */
  grpcPort: number;
  /** Sent as `dapr-api-token` on every call when set ($DAPR_API_TOKEN). */
  apiToken?: string;
  /** How long a call waits for the channel to (re)connect before failing UNAVAILABLE, ms. Default 2000. */
  connectTimeoutMs?: number;
  /** Deadline of each unary call once connected, ms. Default 10000. */
  callTimeoutMs?: number;
}

/** One gRPC channel to daprd with the token, deadlines and error translation every port shares. */
export interface DaprConnection {
  /** "host:port", as error messages and health name it. */
  readonly address: string;
  /** Call a unary `Dapr` method; rejects with a GatewayError (UNAVAILABLE naming the sidecar when it is down). */
  /** `traceparent`: sent as the call's W3C trace context (daprd's own span continues it). */
  unary<M extends DaprMethod>(method: M, request: DaprRequest<M>, opts?: { signal?: CancelSignal; timeoutMs?: number; traceparent?: string }): Promise<DaprResponse<M>>;
  /** Wait until the channel is connected (bounded by `connectTimeoutMs` or `timeoutMs`). */
  ready(signal?: CancelSignal, timeoutMs?: number): Promise<void>;
  /** Open a bidi stream of a `Dapr` method once the channel is connected. */
  bidi<M extends DaprMethod>(method: M, signal?: AbortSignal): Promise<grpc.ClientDuplexStream<DaprRequest<M>, DaprResponse<M>>>;
  /** Translate anything a call threw into a GatewayError (UNAVAILABLE mentions the sidecar). */
  translate(e: unknown): GatewayError;
  close(): void;
}

/** Create the channel (lazily connected: nothing is dialled until the first call). */
export function createDaprConnection(o: DaprConnectionOptions): DaprConnection {
  const address = o.host.includes(":") && !o.host.startsWith("[") ? `[${o.host}]:${o.grpcPort}` : `${o.host}:${o.grpcPort}`;
  const connectTimeoutMs = o.connectTimeoutMs ?? 2000;
  const callTimeoutMs = o.callTimeoutMs ?? 10_000;
  const Ctor = grpc.makeGenericClientConstructor(daprService("Dapr"), "Dapr");
  // A local sidecar restarts in well under a second: keep grpc-js's reconnect backoff short (its default grows to
  // 120 s) and below half the connect budget, so a call made just after the sidecar returns sees a fresh attempt.
  const maxBackoff = Math.max(50, Math.min(500, Math.floor(connectTimeoutMs / 2)));
  const client = new Ctor(address, grpc.credentials.createInsecure(), {
    "grpc.initial_reconnect_backoff_ms": Math.min(100, maxBackoff),
    "grpc.max_reconnect_backoff_ms": maxBackoff,
    "grpc.keepalive_time_ms": 30_000,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
  });
  const methods = client as unknown as Record<string, Function>;

  const unreachable = (detail: string, cause?: unknown): GatewayError =>
    new GatewayError(Code.UNAVAILABLE, `dapr sidecar at ${address} is unreachable: ${detail}`, { cause });

  const translate = (e: unknown): GatewayError => {
    if (e instanceof GatewayError) return e;
    const err = GatewayError.from(e);
    if (err.code === Code.UNAVAILABLE) return unreachable(err.rawMessage, e);
    return err;
  };

  const metadata = (): grpc.Metadata => {
    const md = new grpc.Metadata();
    if (o.apiToken) md.set("dapr-api-token", o.apiToken);
    return md;
  };

  const ready = (signal?: CancelSignal, timeoutMs = connectTimeoutMs): Promise<void> => {
    if (client.getChannel().getConnectivityState(true) === grpc.connectivityState.READY) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(GatewayError.from(signal.reason, Code.CANCELLED));
    const connected = new Promise<void>((resolve, reject) => {
      client.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(unreachable(`not connected within ${timeoutMs} ms`, err)) : resolve()));
    });
    return abortable(connected, signal, (reason) => GatewayError.from(reason, Code.CANCELLED));
  };

  return {
    address,
    ready,
    translate,
    async unary(method, request, opts = {}) {
      const fn = methods[method];
      if (!fn) throw new GatewayError(Code.INTERNAL, `no Dapr method ${method}`);
      await ready(opts.signal);
      return new Promise((resolve, reject) => {
        const signal = opts.signal;
        const deadline = Date.now() + (opts.timeoutMs ?? callTimeoutMs);
        const md = metadata();
        if (opts.traceparent !== undefined) md.set("traceparent", opts.traceparent);
        const call = fn.call(client, request, md, { deadline }, (err: grpc.ServiceError | null, res: unknown) => {
          unlisten();
          if (err) reject(signal?.aborted ? GatewayError.from(signal.reason, Code.CANCELLED) : translate(err));
          else resolve(res as never);
        }) as grpc.ClientUnaryCall;
        const unlisten = onAbort(signal, () => call.cancel());
      });
    },
    async bidi(method, signal) {
      const fn = methods[method];
      if (!fn) throw new GatewayError(Code.INTERNAL, `no Dapr method ${method}`);
      await ready(signal);
      return fn.call(client, metadata()) as grpc.ClientDuplexStream<DaprRequest<typeof method>, DaprResponse<typeof method>>;
    },
    close: () => client.close(),
  };
}
