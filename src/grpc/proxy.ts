import type * as grpc from "@grpc/grpc-js";
import type { Backend } from "../backends/backend.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { BackendSchema } from "../backends/schema.js";
import { openStreamCall } from "../backends/stream-call.js";
import { Code, codeName } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { onAbort } from "../shared/signals.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { Logger } from "../observe/logger.js";
import type { CounterMetric } from "../observe/metrics.js";
import { clientSpan, kindOf, putTraceHeaders, type MethodKind } from "../ops/dispatch.js";
import { grpcServerSpan, type TraceSpan, type Tracer } from "../observe/span.js";
import { statusOf } from "../shared/status.js";
import type { GrpcServiceHost } from "./front.js";
import type { CallBase, MethodHandler, ReplyStream, RequestStream, UnaryCall } from "./native/call-types.js";
import { CallMetadata } from "../shared/metadata.js";

/** What the proxy needs from the gateway's gRPC server setup. */
export interface ProxyBinding {
  /** Shutdown gate and x-api-key check; a GatewayError refuses the call. */
  admit(md: CallMetadata): GatewayError | undefined;
  /** Service names the gateway serves itself (its own services and reflection): never proxied. */
  reserved: readonly string[];
}

/** What the merged reflection service serves besides the gateway's own protos. */
export interface ReflectionSource {
  /** Changes whenever files or services change. */
  version: number;
  files: readonly Uint8Array[];
  services: readonly string[];
}

/** Options of the transparent proxy. */
export interface ProxyOptions {
  /** The registered backends (looked up per call, so a registry created later works). */
  backends: Pick<BackendRegistry, "get">;
  filter: MetadataFilter;
  logger: Logger;
  /** Default deadline of a unary call without one, ms. */
  invokeDeadlineMs: number;
  /** Proxied calls by method kind and status code name. */
  calls: CounterMetric<"kind" | "code">;
  /** Spans of proxied calls (tracing on): a server span and the backend call's client span under it. */
  tracer?: Tracer | undefined;
}

/** The transparent gRPC proxy: backend services served on the gateway's port, bytes in, bytes out. */
export interface GrpcProxy {
  /** Attach to the gateway's server (before or after it listens). */
  bind(server: GrpcServiceHost, binding: ProxyBinding): void;
  /**
   * A backend's schema loaded or changed: route its services. A service another backend (or the gateway) already
   * exposes is not routed and is reported in `conflicts()` and an error log naming both.
   */
  sync(backend: string, schema: BackendSchema): void;
  /** Current conflicts, each naming the service and both owners. Empty when none. */
  conflicts(): readonly string[];
  /**
   * The backend a service is routed to, or undefined. Known from `sync` on, also where the proxy is never bound (a
   * uWS worker thread, whose browser RPC front routes by it); the gateway's own services are reserved only once bound.
   */
  ownerOf(service: string): string | undefined;
  /** The backends' files and routed services, for the gateway's reflection service. */
  reflection(): ReflectionSource;
  /** Shutdown: end every open streaming call UNAVAILABLE and cancel its backend call (unary calls finish on their own). */
  close(): void;
  /** Proxied streaming calls still open. */
  readonly openStreams: number;
}

const identity = (b: Buffer): Buffer => b;

/** A backend's trailers (grpc-js client metadata) as the trailers of the caller's call; entries it refuses are dropped. */
function trailersOf(md: grpc.Metadata | undefined, into: CallMetadata): void {
  if (!md) return;
  for (const [key, values] of Object.entries(md.toJSON())) {
    for (const v of values) {
      try {
        into.add(key, v);
      } catch {
        // A backend's entry the caller's side cannot carry (e.g. a reserved key): not forwarded.
      }
    }
  }
}

/** Create the proxy over the backend registry. */
export function createGrpcProxy(opts: ProxyOptions): GrpcProxy {
  const { backends, filter, logger } = opts;
  let server: GrpcServiceHost | undefined;
  let binding: ProxyBinding | undefined;
  /** service -> owning backend */
  const owner = new Map<string, string>();
  /** backend -> its schema and the paths registered for it */
  const routed = new Map<string, { schema: BackendSchema; services: string[]; paths: string[] }>();
  /** service -> the backend refused it and the message naming both */
  const conflicts = new Map<string, { loser: string; message: string }>();
  let version = 0;
  /** Each backend's latest schema until the proxy is bound (then registered); ownership is already known. */
  const pending = new Map<string, BackendSchema>();
  /** Open streaming calls: each entry ends its call UNAVAILABLE (shutdown). */
  const streams = new Set<() => void>();

  const backendFor = (name: string): Backend => backends.get(name)!;

  const handlerFor = (backendName: string, path: string, kind: MethodKind): MethodHandler<Buffer, Buffer> => {
    const refuse = (md: CallMetadata): GatewayError | undefined => {
      const refused = binding!.admit(md);
      if (refused) opts.calls.inc({ kind, code: refused.codeName });
      return refused;
    };
    const fullName = path.slice(1);
    const serverSpan = grpcServerSpan(fullName);
    /**
     * The call's metadata for the backend and, with tracing on, its spans: the proxied call's server span and the
     * backend call's client span under it, whose context replaces the caller's `traceparent` on the way.
     */
    const forward = (md: CallMetadata): { metadata: grpc.Metadata; server?: TraceSpan; client?: TraceSpan } => {
      const metadata = filter.fromGrpc(md);
      const incoming = opts.tracer?.on ? filter.traceOfGrpc(md, serverSpan) : undefined;
      if (incoming === undefined) return { metadata };
      const server = opts.tracer!.start(incoming);
      return { metadata, server, client: clientSpan(server, fullName, backendFor(backendName).address) };
    };
    const endSpans = (spans: { server?: TraceSpan; client?: TraceSpan }, code: number, message?: string): void => {
      spans.client?.end(code, message);
      spans.server?.end(code, message);
    };
    if (kind === "unary") {
      return {
        kind: "unary",
        serialize: identity,
        deserialize: identity,
        async handle(call: UnaryCall<Buffer>): Promise<Buffer> {
          const refused = refuse(call.metadata);
          if (refused) throw refused;
          // The call's own cancellation, without an AbortController: the backend call is its only listener, and
          // stops listening once it has its answer (the call is also cancelled when its stream closes after the
          // reply).
          const deadline = call.deadline ?? Date.now() + opts.invokeDeadlineMs;
          const sent = forward(call.metadata);
          const o = await backendFor(backendName).call(path, call.request, sent.metadata, deadline, call.cancellation, sent.client?.headers());
          opts.calls.inc({ kind, code: o.ok ? "OK" : codeName(o.code) });
          if (o.ok) {
            endSpans(sent, Code.OK);
            return o.bytes;
          }
          endSpans(sent, o.code, o.message);
          throw new GatewayError(o.code, o.message);
        },
      };
    }
    // Streaming kinds: the backend is read only while the caller's write buffer has room, and the next request is
    // taken from the caller only once the previous one is on its way to the backend, so neither side buffers more
    // than a message here.
    const run = (call: CallBase, input: Buffer | RequestStream<Buffer>, out: ReplyStream<Buffer> | undefined): Promise<Buffer | undefined> =>
      new Promise((resolve, reject) => {
        const refused = refuse(call.metadata);
        if (refused) return reject(refused);
        let ended = false;
        let response: Buffer | undefined;
        const sent = forward(call.metadata);
        if (sent.client) putTraceHeaders(sent.metadata, sent.client);
        const backendCall = openStreamCall(backendFor(backendName), path, sent.metadata, call.deadline ?? Infinity, {
          onMessage(bytes) {
            if (!out) {
              response = bytes;
              backendCall.read();
            } else if (out.write(bytes)) backendCall.read();
            else void out.drained().then(() => backendCall.read());
          },
          onStatus(code, details, trailers) {
            if (ended) return;
            ended = true;
            streams.delete(closing);
            opts.calls.inc({ kind, code: codeName(code) });
            endSpans(sent, code, code === Code.OK ? undefined : details);
            trailersOf(trailers, call.trailers);
            if (code !== Code.OK) reject(new GatewayError(code, details));
            else if (kind === "client-streaming" && response === undefined) reject(new GatewayError(Code.UNIMPLEMENTED, "No message received"));
            else resolve(response);
          },
        });
        // The backend's CANCELLED status is what the caller would see: say why instead.
        const closing = (): void => {
          if (ended) return;
          ended = true;
          streams.delete(closing);
          opts.calls.inc({ kind, code: "UNAVAILABLE" });
          endSpans(sent, Code.UNAVAILABLE, "the gateway is shutting down");
          reject(new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down"));
          backendCall.cancel("the gateway is shutting down");
        };
        streams.add(closing);
        onAbort(call.signal, () => ended || backendCall.cancel("Cancelled on client"));
        backendCall.read();
        if (Buffer.isBuffer(input)) {
          void backendCall.write(input);
          backendCall.end();
          return;
        }
        void (async () => {
          for await (const bytes of input.messages()) {
            if (ended) break;
            await backendCall.write(bytes);
          }
          if (!ended && !call.signal.aborted) backendCall.end();
        })().catch((e: unknown) => {
          const st = statusOf(e);
          endSpans(sent, st.code, st.message);
          reject(e);
        });
      });
    const codec = { serialize: identity, deserialize: identity };
    switch (kind) {
      case "server-streaming":
        return { kind: "serverStream", ...codec, handle: (call) => run(call, call.request, call).then(() => call.end(), (e: unknown) => call.end(GatewayError.from(e))) };
      case "client-streaming":
        return { kind: "clientStream", ...codec, handle: (call) => run(call, call, undefined).then((r) => r!) };
      case "bidi-streaming":
        return { kind: "bidi", ...codec, handle: (call) => run(call, call, call).then(() => call.end(), (e: unknown) => call.end(GatewayError.from(e))) };
    }
  };

  /** Route the backend's services (register their methods when bound) and record who owns each service. */
  const apply = (backendName: string, schema: BackendSchema): void => {
    const srv = server;
    const reserved = new Set(binding?.reserved ?? []);
    const prev = routed.get(backendName);
    for (const p of prev?.paths ?? []) srv?.unregister(p);
    for (const s of prev?.services ?? []) if (owner.get(s) === backendName) owner.delete(s);
    for (const [s, c] of conflicts) if (c.loser === backendName) conflicts.delete(s);
    const services: string[] = [];
    const paths: string[] = [];
    for (const service of schema.services) {
      const other = reserved.has(service) ? "the gateway itself" : owner.get(service);
      if (other !== undefined && other !== backendName) {
        const msg = `service ${service} is exposed by both ${other === "the gateway itself" ? other : `backend ${other}`} and backend ${backendName}; it is proxied to ${other === "the gateway itself" ? "neither backend" : `${other} only`}`;
        conflicts.set(service, { loser: backendName, message: msg });
        // Logged once, when the proxy is bound (where the proxy is never bound the main thread logs it).
        if (srv) logger.error({ service, backends: [other, backendName] }, msg);
        continue;
      }
      owner.set(service, backendName);
      services.push(service);
      if (!srv) continue;
      for (const m of schema.methods) {
        if (!m.fullName.startsWith(service + "/")) continue;
        const kind = kindOf(m);
        srv.register(m.path, handlerFor(backendName, m.path, kind));
        paths.push(m.path);
      }
    }
    routed.set(backendName, { schema, services, paths });
    version++;
    if (srv) logger.info({ backend: backendName, services }, "backend services proxied");
  };

  return {
    bind(srv, b) {
      server = srv;
      binding = b;
      for (const [name, schema] of pending) apply(name, schema);
      pending.clear();
    },
    sync(backendName, schema) {
      if (!server) pending.set(backendName, schema);
      apply(backendName, schema);
    },
    conflicts: () => [...conflicts.values()].map((c) => c.message),
    ownerOf: (service) => owner.get(service),
    reflection() {
      const files: Uint8Array[] = [];
      const services: string[] = [];
      for (const r of routed.values()) {
        files.push(...r.schema.set.files);
        services.push(...r.services);
      }
      return { version, files, services };
    },
    get openStreams() {
      return streams.size;
    },
    close() {
      for (const end of [...streams]) end();
    },
  };
}
