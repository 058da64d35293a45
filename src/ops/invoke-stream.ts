import type * as grpc from "@grpc/grpc-js";
import type { Backend } from "../backends/backend.js";
import type { MethodEntry } from "../backends/schema.js";
import { openStreamCall, type StreamCall } from "../backends/stream-call.js";
import { Code, codeName } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import { statusOf, statusOk, type Status } from "../shared/status.js";
import type { Converter, SchemaSet } from "../workers/converter-types.js";
import type { CounterMetric, HistogramMetric } from "../observe/metrics.js";
import { clientSpan, kindOf, putTraceHeaders, requireString, resolveTraced, type MethodKind } from "./dispatch.js";
import type { TraceIncoming, TraceSpan, Tracer } from "../observe/span.js";

/**
 * The final status of a streamed invocation; each front writes it in-band (docs/dispatch.md "Streaming invoke": the
 * Status object of docs/contract.md, without the data).
 */
export type StreamStatus = Status;

/** Where a streamed invocation delivers its outcome; a front end (gRPC, REST, WebSocket) implements it. */
export interface StreamSink {
  /**
   * The resolved method's kind, before any message (e.g. REST refuses client streaming here). Returning a
   * GatewayError fails the invocation in-band with it, before the backend is called.
   */
  start?(kind: MethodKind, method: MethodEntry): GatewayError | undefined;
  /**
   * One backend response as proto3 JSON text. Return false when the consumer is full: no further message is
   * delivered (and the backend is not read) until `resume()` is called on the handle.
   */
  message(json: string): boolean;
  /**
   * With `requestBytes` given (a binary invocation): each backend response as it came, protobuf binary, instead of
   * `message`. Returns false as `message` does.
   */
  bytes?(message: Buffer): boolean;
  /** The final status; called exactly once, after every message. */
  end(status: StreamStatus): void;
}

/** The first request of a streamed invocation. */
export interface InvokeStreamInput {
  service: unknown;
  method: unknown;
  /**
   * The first request message as proto3 JSON text. Unary and server-streaming: empty means `{}`. Client and bidi
   * streaming: empty means no message yet (send them with `write()`).
   */
  requestData: unknown;
  /**
   * Binary instead of JSON (unary and server-streaming methods only): the first request as protobuf binary, sent as
   * is (`requestData` is ignored), and every response to `sink.bytes` unconverted.
   */
  requestBytes?: Uint8Array;
  /** Already filtered through the forwarding allow-list. */
  metadata: grpc.Metadata;
  /** Epoch ms; none means no deadline for streaming kinds and now + `invokeDeadlineMs` for unary. */
  deadline?: number | undefined;
  /** The caller's trace context and the server span to open; set by the front only when tracing is on. */
  trace?: TraceIncoming | undefined;
}

/** The caller's side of a running streamed invocation. */
export interface InvokeStreamHandle {
  /**
   * One more request message (client and bidi streaming). Resolves once it reached the backend's HTTP/2 stream,
   * so a caller that awaits before reading its next message is slowed by a slow backend. A bad message ends the
   * invocation in-band (INVALID_ARGUMENT naming the problem).
   */
  write(requestData: unknown): Promise<void>;
  /** No more request messages (half-close). Unary and server-streaming calls half-close on their own. */
  end(): void;
  /** The sink can take messages again after `message()` returned false. */
  resume(): void;
  /** The caller went away or cancelled: cancel the backend call; the sink gets CANCELLED unless already ended. */
  cancel(message?: string): void;
  /** End the invocation now with this error in-band (e.g. a protocol error of the front end); cancels the backend call. */
  fail(error: GatewayError): void;
}

/** What the streamed invocation needs. */
export interface InvokeStreamDeps {
  backendOf(service: unknown): Backend;
  converter: Converter;
  invokeDeadlineMs: number;
  /** Streamed invocations by method kind and outcome. */
  invocations: CounterMetric<"kind" | "code">;
  /** Duration of streamed invocations by method kind and outcome. */
  duration: HistogramMetric<"kind" | "code">;
  /** Messages moved, by method kind and direction ("request" or "response"). */
  messages: CounterMetric<"kind" | "direction">;
  /** Invocations still running (added at start, removed once the sink got its status), so shutdown can end them. */
  open?: Set<InvokeStreamHandle>;
  /** Spans of each invocation a front handed a trace context (tracing on); absent: none. */
  tracer?: Tracer;
}

function dataOf(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw new GatewayError(Code.INVALID_ARGUMENT, `request data must be JSON text (a string), got ${typeof v}`);
  return v;
}

/**
 * Start a streamed invocation of any method kind. Never throws: every failure (unknown service or method, bad
 * JSON, backend status) reaches `sink.end` in-band. Ordering: responses are converted and delivered one at a time
 * in arrival order, and requests are converted and sent one at a time in `write()` order.
 */
export function startInvokeStream(deps: InvokeStreamDeps, input: InvokeStreamInput, sink: StreamSink): InvokeStreamHandle {
  const started = performance.now();
  let kind: MethodKind | "(unresolved)" = "(unresolved)";
  let call: StreamCall | undefined;
  let ended = false;
  let cancelled: string | undefined;
  let halfClosed = false;
  let paused = false;
  let pendingStatus: StreamStatus | undefined;
  let converting = false;
  // Requests written before the method resolved, and the chain that keeps conversions in order.
  let requestChain: Promise<unknown> = Promise.resolve();
  let resolveReady!: (ok: boolean) => void;
  const ready = new Promise<boolean>((r) => (resolveReady = r));
  let schemaSet: SchemaSet | undefined;
  let method: MethodEntry | undefined;
  // Tracing on: the stream's server span, and the backend call's client span once it is open. Messages get no span
  // each (a stream may carry millions): the server span counts them.
  const span: TraceSpan | undefined = input.trace !== undefined && deps.tracer?.on === true ? deps.tracer.start(input.trace) : undefined;
  let client: TraceSpan | undefined;

  // Set once the handle exists (a failure can finish the invocation synchronously, before that).
  let self: InvokeStreamHandle | undefined;
  const finish = (status: StreamStatus): void => {
    if (ended) return;
    ended = true;
    if (self) deps.open?.delete(self);
    const k = kind;
    const code = codeName(status.code);
    deps.invocations.inc({ kind: k, code });
    deps.duration.observe({ kind: k, code }, (performance.now() - started) / 1000);
    if (span) {
      // A call that never reached the backend (or was cancelled before its status) ends its client span here.
      client?.end(status.code, status.message);
      span.set("gateway.method.kind", k);
      span.end(status.code, status.message);
    }
    sink.end(status);
  };
  const fail = (e: unknown): void => {
    const err = GatewayError.from(e);
    if (call && !ended) call.cancel(err.rawMessage);
    finish(statusOf(err));
  };
  // The status waits for a response still being converted, so it always comes after the last message.
  const settle = (): void => {
    if (pendingStatus && !converting) finish(pendingStatus);
  };

  const binary = input.requestBytes !== undefined;
  const onMessage = (bytes: Buffer): void => {
    if (ended) return;
    if (binary) {
      deps.messages.inc({ kind: kind as MethodKind, direction: "response" });
      if (sink.bytes!(bytes)) call!.read();
      else paused = true;
      return;
    }
    converting = true;
    deps.converter.binaryToJson(schemaSet!, method!.outputType, bytes).then(
      (json) => {
        converting = false;
        if (ended) return;
        deps.messages.inc({ kind: kind as MethodKind, direction: "response" });
        if (sink.message(json)) call!.read();
        else paused = true;
        settle();
      },
      (e: unknown) => {
        converting = false;
        const err = GatewayError.from(e);
        const code = err.code === Code.INVALID_ARGUMENT ? Code.INTERNAL : err.code;
        fail(new GatewayError(code, `a response of ${method!.fullName} could not be converted to JSON: ${err.rawMessage}`));
      },
    );
  };

  const sendRequest = async (json: string): Promise<void> => {
    const bytes = await deps.converter.jsonToBinary(schemaSet!, method!.inputType, json);
    if (ended) return;
    deps.messages.inc({ kind: kind as MethodKind, direction: "request" });
    await call!.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  };

  void (async () => {
    try {
      const backend = deps.backendOf(input.service);
      const name = requireString("method", input.method);
      const first = dataOf(input.requestData);
      const resolved = await resolveTraced(backend, name, undefined, span);
      if (span) span.set("gateway.service", typeof input.service === "string" ? echo(input.service) : "(unknown)");
      method = resolved.method;
      schemaSet = resolved.schema.set;
      kind = kindOf(method);
      const refused = sink.start?.(kind, method);
      if (refused) throw refused;
      if (cancelled !== undefined) throw new GatewayError(Code.CANCELLED, cancelled);
      const streamingRequests = method.clientStreaming;
      if (binary && streamingRequests) throw new GatewayError(Code.UNIMPLEMENTED, `method ${method.fullName} is ${kind}; a binary invocation supports unary and server-streaming methods only`);
      let firstBytes: Uint8Array | undefined = input.requestBytes;
      if (!binary && (!streamingRequests || first !== "")) firstBytes = await deps.converter.jsonToBinary(schemaSet, method.inputType, first || "{}");
      if (cancelled !== undefined) throw new GatewayError(Code.CANCELLED, cancelled);
      const deadline = input.deadline ?? (kind === "unary" ? Date.now() + deps.invokeDeadlineMs : Infinity);
      if (span) {
        client = clientSpan(span, method.fullName, backend.address);
        putTraceHeaders(input.metadata, client);
      }
      call = openStreamCall(backend, method.path, input.metadata, deadline, {
        onMessage,
        onStatus(code, message) {
          pendingStatus = code === Code.OK ? statusOk() : { code, message };
          if (client) {
            client.end(code, message);
            client = undefined;
          }
          settle();
        },
      });
      call.read();
      if (firstBytes) {
        deps.messages.inc({ kind, direction: "request" });
        void call.write(Buffer.from(firstBytes.buffer, firstBytes.byteOffset, firstBytes.byteLength));
      }
      if (!streamingRequests) call.end();
      resolveReady(true);
    } catch (e) {
      resolveReady(false);
      fail(e);
    }
  })();

  const handle: InvokeStreamHandle = {
    write(requestData) {
      // Decided now, not when the chain gets here: writes made before end() are sent even while the method resolves.
      const afterEnd = halfClosed;
      const next = requestChain.then(async () => {
        if (!(await ready) || ended) return;
        if (!method!.clientStreaming) {
          throw new GatewayError(Code.INVALID_ARGUMENT, `method ${method!.fullName} is ${kind}: only the first request may carry request_data`);
        }
        if (afterEnd) throw new GatewayError(Code.FAILED_PRECONDITION, "request_data after the end of the request stream");
        await sendRequest(dataOf(requestData) || "{}");
      });
      requestChain = next.catch(fail);
      return requestChain.then(() => undefined);
    },
    end() {
      if (halfClosed) return;
      halfClosed = true;
      requestChain = requestChain.then(async () => {
        if ((await ready) && !ended && method!.clientStreaming) call!.end();
      });
    },
    resume() {
      if (!paused || ended) return;
      paused = false;
      call?.read();
    },
    fail(error) {
      if (ended) return;
      cancelled ??= error.rawMessage;
      fail(error);
    },
    cancel(message = "the caller cancelled the call") {
      if (ended || cancelled !== undefined) return;
      cancelled = message;
      if (call) call.cancel(message);
      // Before the call exists the startup path sees `cancelled` and ends CANCELLED itself.
    },
  };
  self = handle;
  if (!ended) deps.open?.add(handle);
  return handle;
}
