import type { CancelSignal } from "../shared/signals.js";
import * as grpc from "@grpc/grpc-js";
import type { Backend, CallOutcome } from "../backends/backend.js";
import type { BackendRegistry } from "../backends/registry.js";
import { encodeFileDescriptorSet, messageFields, type MethodEntry } from "../backends/schema.js";
import { Code, codeName } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { statusOf, statusOk, type Status } from "../shared/status.js";
import type { MethodSchema } from "../shared/method-schema.js";
import type { ConversionReport, Converter } from "../workers/converter-types.js";
import type { ServiceRegistry } from "../config/services.js";
import type { CounterMetric, HistogramMetric } from "../observe/metrics.js";
import { echo } from "../shared/echo.js";
import { sharedAttributes, type TraceIncoming, type TraceSpan, type Tracer } from "../observe/span.js";

/** One invocation, whatever front end it came from. */
export interface InvokeInput {
  /** Registered service name (unvalidated caller input). */
  service: unknown;
  /** Method name (short, "pkg.Service/Method" or "pkg.Service.Method"). */
  method: unknown;
  /** The request message as proto3 JSON text; empty means `{}`. */
  requestData: unknown;
  /** Already filtered through the forwarding allow-list. */
  metadata: grpc.Metadata;
  /** Epoch ms; default now + `invokeDeadlineMs`. */
  deadline?: number | undefined;
  /** Aborting it cancels the backend call. */
  signal?: CancelSignal | undefined;
  /** The caller's trace context and the server span to open; set by the front only when tracing is on. */
  trace?: TraceIncoming | undefined;
}

/**
 * The in-band outcome (docs/dispatch.md "Outcomes and errors"): its status and the response. Each front writes the
 * status in its wire shape (toInBand for `{success, status, message}`).
 */
export interface InvokeResult extends Status {
  /** proto3 JSON text of the backend response; empty when failed. */
  responseData: string;
}

/** One invocation with the request already in protobuf binary (the browser RPC front's `application/proto`). */
export interface InvokeBytesInput extends Omit<InvokeInput, "requestData"> {
  /** The request message, protobuf binary, passed to the backend as is. */
  request: Uint8Array;
}

/** The outcome of invokeBytes: its status and, when OK, the backend's response bytes as they came. */
export interface InvokeBytesResult extends Status {
  response: Buffer | undefined;
}

/** The dynamic dispatch operations; the gRPC and REST front ends are thin shells around these. */
export interface DispatchOps {
  /** Call a backend method. Never throws: every failure is in the result (in-band). */
  invoke(input: InvokeInput): Promise<InvokeResult>;
  /**
   * Call a backend's unary method with binary request and response: no conversion, counted as invoke counts. Never
   * throws. Always runs here (no offload: its callers are the uWS fronts, which run where their connections are).
   */
  invokeBytes(input: InvokeBytesInput): Promise<InvokeBytesResult>;
  /** Dialable backends, by registered name, in config order. */
  listServices(): readonly string[];
  /** Methods of every service the backend hosts (reflection excluded). NOT_FOUND for an unknown service. */
  listMethods(service: unknown, opts?: { refresh?: boolean; signal?: AbortSignal }): Promise<readonly MethodEntry[]>;
  /** The fields of a method's input (default) or output message. */
  methodSchema(service: unknown, method: unknown, type: unknown, signal?: AbortSignal): Promise<MethodSchema>;
  /** A binary google.protobuf.FileDescriptorSet of every file the backend's services need. */
  protos(service: unknown, signal?: AbortSignal): Promise<Uint8Array>;
}

/**
 * An invocation as it crosses to a uWS worker thread (structured-clone safe): the caller's fields as given, the
 * metadata as the entries the allow-list let through (filtered on the main thread, so credentials never cross).
 */
export interface InvokeWire {
  service: unknown;
  method: unknown;
  requestData: unknown;
  /** [key, value] pairs, in order, repeated keys kept. */
  metadata: Array<[string, string]>;
  deadline: number | undefined;
  /** The server span the sending thread opened (tracing on): the thread running the call makes its spans under it. */
  trace?: TraceIncoming | undefined;
}

/** An invocation for another thread to run, under `span` when this thread traces it. */
export function invokeToWire(input: InvokeInput, span?: TraceSpan): InvokeWire {
  const metadata: Array<[string, string]> = [];
  for (const [key, values] of Object.entries(input.metadata.toJSON())) {
    for (const v of values) if (typeof v === "string") metadata.push([key, v]);
  }
  const wire: InvokeWire = { service: input.service, method: input.method, requestData: input.requestData, metadata, deadline: input.deadline };
  if (span) wire.trace = span.headers();
  return wire;
}

/** An invocation from another thread, run here; `signal` aborts when the caller gave up. */
export function invokeFromWire(wire: InvokeWire, signal: AbortSignal): InvokeInput {
  const metadata = new grpc.Metadata();
  for (const [key, value] of wire.metadata) metadata.add(key, value);
  return { service: wire.service, method: wire.method, requestData: wire.requestData, metadata, deadline: wire.deadline, signal, trace: wire.trace };
}

/**
 * Runs an invocation on another thread (a uWS worker thread, which has its own backend channels, schemas and
 * converter), or answers undefined when none can take it (the caller runs it itself). Rejects with a GatewayError when
 * the call got no answer (the thread exited, the bridge is full, or it did not answer within `timeoutMs`).
 */
export type InvokeOffload = (wire: InvokeWire, signal: CancelSignal | undefined, timeoutMs: number) => Promise<InvokeResult> | undefined;

/** Past the invocation's own deadline, how long the thread running it gets to answer before the bridge gives up, ms. */
export const OFFLOAD_GRACE_MS = 2_000;

/** What the operations need. */
export interface DispatchDeps {
  services: ServiceRegistry;
  backends: BackendRegistry;
  converter: Converter;
  invokeDeadlineMs: number;
  invocations: CounterMetric<"service" | "code">;
  latency: HistogramMetric<"service" | "code">;
  /**
   * Where invoke runs when it is not here (the main thread with `--threads` > 1: gRPC Invoke/InvokeJson run on the
   * uWS worker threads); read per call. Absent, or answering undefined: here.
   */
  offload?: InvokeOffload;
  /**
   * Offload only a call that arrives while at least this many invocations are in flight here (run here or offloaded).
   * Default 1: a lone call runs here, sparing it two thread hops; a call that would queue behind others goes to a
   * thread. 0 offloads every call. (`--grpc-invoke-offload`.)
   */
  offloadMinInflight?: number;
  /** Spans of each invocation a front handed a trace context (tracing on); absent: none. */
  tracer?: Tracer;
}

const EMPTY_JSON = "{}";

/** The four gRPC method kinds, as metric labels and in messages. */
export type MethodKind = "unary" | "server-streaming" | "client-streaming" | "bidi-streaming";

/** The kind of a reflected method. */
export function kindOf(m: { clientStreaming: boolean; serverStreaming: boolean }): MethodKind {
  if (m.clientStreaming) return m.serverStreaming ? "bidi-streaming" : "client-streaming";
  return m.serverStreaming ? "server-streaming" : "unary";
}

/** A required, non-empty string field of a request. */
export function requireString(field: string, v: unknown): string {
  if (typeof v !== "string") throw new GatewayError(Code.INVALID_ARGUMENT, `${field} must be a string (got ${v === null ? "null" : typeof v})`);
  if (v === "") throw new GatewayError(Code.INVALID_ARGUMENT, `${field} must not be empty`);
  return v;
}

function failed(e: unknown): InvokeResult {
  return { ...statusOf(e), responseData: "" };
}

const CACHE_HIT = Object.freeze({ "gateway.schema.cache": "hit" });
const CACHE_MISS = Object.freeze({ "gateway.schema.cache": "miss" });

/** End a span with the status of a failure. */
function endFailed(span: TraceSpan | undefined, e: unknown): void {
  if (!span) return;
  const s = statusOf(e);
  span.end(s.code, s.message);
}

/** A conversion's span under `parent`, with the report the converter fills in for it. */
interface ConversionTrace {
  readonly span: TraceSpan;
  readonly typeName: string;
  readonly report: ConversionReport;
}

/** A conversion's span under `parent` (tracing on), else nothing; its attributes are set when it ends. */
function conversionSpan(parent: TraceSpan | undefined, name: string, typeName: string): ConversionTrace | undefined {
  if (!parent) return undefined;
  return { span: parent.child(name, "internal"), typeName, report: { where: "inline", queuedMs: 0 } };
}

/**
 * The backend call's client span (RPC conventions). Its context goes to the backend as `traceparent` and `tracestate`,
 * replacing the caller's, which the forwarding allow-list let through (the caller's trace continues through the
 * gateway's spans instead): a unary call hands `span.headers()` to the backend call, a stream puts them in its
 * metadata (putTraceHeaders).
 */
export function clientSpan(parent: TraceSpan, fullName: string, address: string): TraceSpan {
  const attributes = sharedAttributes(fullName, address, () => {
    const slash = fullName.indexOf("/");
    const colon = address.lastIndexOf(":");
    return {
      "rpc.system": "grpc",
      "rpc.service": fullName.slice(0, slash),
      "rpc.method": fullName.slice(slash + 1),
      "server.address": address.slice(0, colon).replace(/^\[|\]$/g, ""),
      "server.port": Number(address.slice(colon + 1)),
    };
  });
  return parent.child(fullName, "client", attributes);
}

/** A client span's context in a streaming call's metadata, in place of the caller's. */
export function putTraceHeaders(metadata: grpc.Metadata, span: TraceSpan): void {
  const h = span.headers();
  metadata.set("traceparent", h.traceparent);
  if (h.tracestate) metadata.set("tracestate", h.tracestate);
  else metadata.remove("tracestate");
}

/**
 * Resolve `method` on the backend under a "resolve schema" span of `span` (a cache miss reflects the backend; on a uWS
 * thread: asks the main thread, which reflects once for the process).
 */
export async function resolveTraced(backend: Backend, method: string, signal: CancelSignal | undefined, span: TraceSpan | undefined): ReturnType<Backend["resolve"]> {
  const resolving = span?.child("resolve schema", "internal", backend.cachedSchema() ? CACHE_HIT : CACHE_MISS);
  try {
    const resolved = await backend.resolve(method, signal);
    resolving?.end();
    return resolved;
  } catch (e) {
    endFailed(resolving, e);
    throw e;
  }
}

/** The unary backend call under a client span of `span` (tracing on), ended with the call's outcome. */
async function callTraced(
  backend: Backend,
  method: MethodEntry,
  request: Uint8Array,
  input: Pick<InvokeInput, "metadata" | "signal">,
  deadline: number,
  span: TraceSpan | undefined,
): Promise<CallOutcome> {
  const client = span ? clientSpan(span, method.fullName, backend.address) : undefined;
  let outcome: CallOutcome;
  try {
    outcome = await backend.call(method.path, request, input.metadata, deadline, input.signal, client?.headers());
  } catch (e) {
    endFailed(client, e);
    throw e;
  }
  if (outcome.ok) client?.end();
  else client?.end(outcome.code, outcome.message);
  return outcome;
}

function bytesFailed(e: unknown): InvokeBytesResult {
  return { ...statusOf(e), response: undefined };
}

/**
 * End a conversion's span: its message type and where it ran (one shared set per type and place) and, on the pool,
 * how long it waited for a worker.
 */
function endConversion(c: ConversionTrace, e?: unknown): void {
  const { typeName } = c;
  const where = c.report.where;
  c.span.setShared(sharedAttributes(typeName, where, () => ({ "gateway.message.type": typeName, "gateway.conversion": where })));
  if (where === "pool") c.span.set("gateway.conversion.queue_ms", c.report.queuedMs);
  if (e === undefined) c.span.end();
  else endFailed(c.span, e);
}

/** The dialable backend a caller's `service` names; INVALID_ARGUMENT or NOT_FOUND naming it otherwise. */
export function backendNamed(deps: Pick<DispatchDeps, "services" | "backends">, service: unknown): Backend {
  const name = requireString("service", service);
  const b = deps.backends.get(name);
  if (b) return b;
  if (deps.services.get(name)) throw new GatewayError(Code.NOT_FOUND, `service ${echo(name)} is registered without a gRPC address, so it cannot be invoked`);
  throw new GatewayError(Code.NOT_FOUND, `service ${echo(name)} is not registered`);
}

/** Create the operations over the backends and a converter. */
export function createDispatchOps(deps: DispatchDeps): DispatchOps {
  const { backends, converter } = deps;
  const backendOf = (service: unknown): Backend => backendNamed(deps, service);

  const invokeOrThrow = async (input: InvokeInput, backend: Backend, span: TraceSpan | undefined): Promise<InvokeResult> => {
    const methodName = requireString("method", input.method);
    if (input.requestData !== undefined && input.requestData !== null && typeof input.requestData !== "string") {
      throw new GatewayError(Code.INVALID_ARGUMENT, `request data must be JSON text (a string), got ${typeof input.requestData}`);
    }
    const { schema, method } = await resolveTraced(backend, methodName, input.signal, span);
    if (method.clientStreaming || method.serverStreaming) {
      const kind = kindOf(method);
      throw new GatewayError(Code.UNIMPLEMENTED, `method ${method.fullName} is ${kind}; invoke supports unary methods only (stream it with InvokeStream, POST /v1/gateway/invoke-stream or /v1/gateway/invoke-ws)`);
    }
    const json = (input.requestData as string | undefined) || EMPTY_JSON;
    const toBinary = conversionSpan(span, "json to protobuf", method.inputType);
    let request: Uint8Array;
    try {
      request = await converter.jsonToBinary(schema.set, method.inputType, json, input.signal, toBinary?.report);
    } catch (e) {
      if (toBinary) endConversion(toBinary, e);
      throw e;
    }
    if (toBinary) endConversion(toBinary);
    const deadline = input.deadline ?? Date.now() + deps.invokeDeadlineMs;
    const outcome = await callTraced(backend, method, request, input, deadline, span);
    if (!outcome.ok) return { code: outcome.code, message: outcome.message, responseData: "" };
    let responseData: string;
    const toJson = conversionSpan(span, "protobuf to json", method.outputType);
    try {
      responseData = await converter.binaryToJson(schema.set, method.outputType, outcome.bytes, input.signal, toJson?.report);
      if (toJson) endConversion(toJson);
    } catch (e) {
      if (toJson) endConversion(toJson, e);
      const err = GatewayError.from(e);
      // A response the schema cannot decode is the backend's fault, not the caller's.
      const code = err.code === Code.INVALID_ARGUMENT ? Code.INTERNAL : err.code;
      throw new GatewayError(code, `the response of ${method.fullName} could not be converted to JSON: ${err.rawMessage}`, { cause: e });
    }
    return { ...statusOk(), responseData };
  };

  /** Count a call and its latency; a sampled span's ids become the latency bucket's exemplar. */
  const record = (label: string, result: Status, started: number, span?: TraceSpan): void => {
    const code = codeName(result.code);
    deps.invocations.inc({ service: label, code });
    deps.latency.observe({ service: label, code }, (performance.now() - started) / 1000, span?.sampled === true ? span : undefined);
  };

  /**
   * The thread that ran the invocation counted it and its outcome is returned as is (the same op ran there). One
   * that got no answer is counted here, unless the caller gave up: the thread sees that abort and counts the call.
   */
  const offloaded = async (far: Promise<InvokeResult>, input: InvokeInput, started: number): Promise<InvokeResult> => {
    try {
      return await far;
    } catch (e) {
      const result = failed(e);
      if (!input.signal?.aborted) {
        let label = "(unknown)";
        try {
          label = backendOf(input.service).name;
        } catch {
          // an invalid service name: counted as the op counts it
        }
        record(label, result, started);
      }
      return result;
    }
  };

  /**
   * Run an invocation here on the backend `service` names, counted by that backend and the outcome's code; `span` (the
   * call's server span) ends with the outcome.
   */
  const countedHere = async <R extends Status>(service: unknown, run: (backend: Backend) => Promise<R>, failure: (e: unknown) => R, started: number, span?: TraceSpan): Promise<R> => {
    let label = "(unknown)";
    let result: R;
    try {
      const backend = backendOf(service);
      label = backend.name;
      span?.set("gateway.service", label);
      result = await run(backend);
    } catch (e) {
      result = failure(e);
    }
    record(label, result, started, span);
    span?.end(result.code, result.message);
    return result;
  };
  const invokeHere = (input: InvokeInput, started: number, span: TraceSpan | undefined): Promise<InvokeResult> =>
    countedHere(input.service, (b) => invokeOrThrow(input, b, span), failed, started, span);

  const invokeBytesOrThrow = async (input: InvokeBytesInput, backend: Backend, span: TraceSpan | undefined): Promise<InvokeBytesResult> => {
    const { method } = await resolveTraced(backend, requireString("method", input.method), input.signal, span);
    if (method.clientStreaming || method.serverStreaming) {
      throw new GatewayError(Code.UNIMPLEMENTED, `method ${method.fullName} is ${kindOf(method)}; this call supports unary methods only`);
    }
    const deadline = input.deadline ?? Date.now() + deps.invokeDeadlineMs;
    const outcome = await callTraced(backend, method, input.request, input, deadline, span);
    return outcome.ok ? { ...statusOk(), response: outcome.bytes } : { code: outcome.code, message: outcome.message, response: undefined };
  };

  const offloadMin = deps.offloadMinInflight ?? 1;
  /** Invocations in flight here, run here or offloaded. */
  let inflight = 0;
  const tracer = deps.tracer;

  /**
   * A call's server span, which the code that has its outcome ends (countedHere, or invokeRouted for an offloaded
   * call): no promise of its own per traced call. Tracing off: the fronts hand no trace context, and this check is
   * all a call pays for tracing.
   */
  const serverSpan = (trace: TraceIncoming | undefined): TraceSpan | undefined => (trace === undefined || tracer?.on !== true ? undefined : tracer.start(trace));

  /** Run here or on another thread, under `span` (ended with the outcome); never throws. */
  const invokeRouted = async (input: InvokeInput, started: number, span: TraceSpan | undefined): Promise<InvokeResult> => {
    // A call already given up is answered here at once, as the op always answers it.
    if (deps.offload && inflight >= offloadMin && !input.signal?.aborted) {
      const deadline = input.deadline ?? Date.now() + deps.invokeDeadlineMs;
      const far = deps.offload(invokeToWire(input, span), input.signal, deadline - Date.now() + OFFLOAD_GRACE_MS);
      if (far) {
        // The thread runs the call under this span but cannot annotate it: name the backend here.
        if (span) span.set("gateway.service", typeof input.service === "string" ? echo(input.service) : "(unknown)");
        inflight++;
        let result: InvokeResult;
        try {
          result = await offloaded(far, input, started);
        } finally {
          inflight--;
        }
        span?.end(result.code, result.message);
        return result;
      }
    }
    inflight++;
    try {
      return await invokeHere(input, started, span);
    } finally {
      inflight--;
    }
  };

  return {
    invoke(input) {
      const started = performance.now();
      return invokeRouted(input, started, serverSpan(input.trace));
    },
    invokeBytes(input) {
      const started = performance.now();
      const span = serverSpan(input.trace);
      return countedHere(input.service, (b) => invokeBytesOrThrow(input, b, span), bytesFailed, started, span);
    },
    listServices: () => backends.names,
    async listMethods(service, opts = {}) {
      const b = backendOf(service);
      const schema = opts.refresh ? await b.refresh(opts.signal) : await b.schema(opts.signal);
      return schema.methods;
    },
    async methodSchema(service, method, type, signal) {
      const b = backendOf(service);
      const name = requireString("method", method);
      const t = type === undefined || type === null || type === "" ? "input" : type;
      if (t !== "input" && t !== "output") throw new GatewayError(Code.INVALID_ARGUMENT, `type must be input or output (got ${echo(JSON.stringify(type) ?? String(type))})`);
      const { method: m } = await b.resolve(name, signal);
      const desc = t === "input" ? m.desc.input : m.desc.output;
      return { inputTypeName: m.inputType, outputTypeName: m.outputType, schemaType: t, fields: messageFields(desc) };
    },
    async protos(service, signal) {
      const schema = await backendOf(service).schema(signal);
      return encodeFileDescriptorSet(schema.set);
    },
  };
}
