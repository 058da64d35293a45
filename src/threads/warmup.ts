/**
 * The invoke warm-up's shared parts (docs/warmup.md): the echo backend's identity and requests, the REST calls,
 * `ownWarmup`, which runs a warm-up through the gateway's own objects and leaves nothing of it, and `warmUpThread`, a
 * uWS thread's warm-up through private dispatch facilities. Before the gateway listens, its gRPC front and each HTTP
 * server (the main thread's with `--threads 1`, each uWS thread's otherwise: a V8 isolate of its own, which nothing on
 * the main thread can warm) serve a 127.0.0.1 ephemeral port, and the gateway makes JSON invokes of the echo backend
 * through them (src/main/own-warmup.ts, uws-thread.ts), so V8 has compiled the very closures, routes and servers the
 * first client's calls run through. A uWS thread first makes as many through two private facilities of its own.
 */
import { Agent, request } from "node:http";
import { randomBytes } from "node:crypto";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { settleWithin, within } from "../shared/timers.js";
import { warmupEchoProtos } from "../shared/protos.js";
import { ClosingFlag } from "./closing-flag.js";
import type { Runtime } from "../runtime/runtime.js";
import type { ReflectionResult } from "../backends/reflection-client.js";
import type { WorkerSlots } from "../workers/worker-slots.js";
import { loadRegistry, tracerOptions, validateGatewayOptions, type ValidatedOptions } from "../config/options.js";
import type { Logger } from "../observe/logger.js";
import { createMetrics, type Metrics } from "../observe/metrics.js";
import { createTracer } from "../observe/tracing.js";
import type { Tracer } from "../observe/span.js";
import { createAuthenticator } from "../ops/auth.js";
import type { GatewayContext } from "../ops/context.js";
import { startRestServer, type RestServer } from "../http/router.js";
import { gatewayServerDeps } from "../http/server-deps.js";
import { createDispatchFacility, type DispatchFacility } from "../facilities/dispatch.js";

/** The service name the echo backend is invoked under (a private gateway's service, or the gateway's hidden backend). */
export const ECHO_BACKEND = "warmup-echo";
/** The echo backend's gRPC service (proto/platform/warmup/echo.proto). */
export const ECHO_SERVICE = "platform.warmup.v1.Echo";
/** Calls in flight at once on each front: a few, as a client pool keeps them. */
const LANES = 4;
/**
 * The share of the calls made one at a time after the lanes, as a client at concurrency 1 makes them. With nothing
 * else in flight a call takes paths the lanes rarely do: its writes leave at once instead of queueing behind another
 * call's, its connection is idle in between.
 * Measured (BENCHMARKS.md, "Session 31"): gRPC's c=1 added p99 at or below grpc-gateway's in 17 of 21 repetitions
 * against 10 of 21 with every call in lanes.
 */
const SERIAL_SHARE = 0.5;
/** Each call's deadline is this less 0..999 ms: it changes from call to call, as a client's does. */
export const CALL_TIMEOUT_MS = 30_000;
/** Bound on a warm-up through the gateway's own objects (`ownWarmup`); past it the gateway starts cold. */
const OWN_WARMUP_TIMEOUT_MS = 30_000;
/** Bound on a thread's warm-up through its private facilities (`warmUpThread`); past it the thread goes on without. */
const THREAD_WARMUP_TIMEOUT_MS = 30_000;
/** Bound on flushing a private facility's spans into the dropping receiver. */
const TRACE_FLUSH_MS = 1000;
/**
 * The private calls go through two private facilities in turn, this share through the first: compiled code records the
 * closures it called, and once two instances have run V8's feedback names their shared code (src/main/warmup.ts,
 * FIRST_GATEWAY_SHARE).
 */
const FIRST_SHARE = 0.3;
/** Time the calls of a warm-up past its bound get to fail once their backend is dropped. */
const SETTLE_MS = 2000;

/** What a uWS thread is handed to warm up with (ThreadData.warmup): only at the gateway's start, not on a restart. */
export interface ThreadWarmup {
  /** The main thread's echo backend, on 127.0.0.1. */
  echoPort: number;
  /** JSON invokes to make (`--warmup-calls`), through the private facilities and again through the thread's own server. */
  calls: number;
  /** Where the private facilities export their spans when the gateway traces: a receiver that drops them. */
  tracesEndpoint?: string;
}

/**
 * Values of each kind as JSON clients send them, taken in turn: compiled conversion code keeps the branches and number
 * representations it saw, so a warm-up with one kind of value leaves the others cold. 64-bit integers as small and
 * large decimal strings (past 2^53, the type's bounds), negative, and as JSON numbers; doubles integral and not;
 * times in every month (January and February take another branch of the day count), with and without fractions.
 */
const INT64S: ReadonlyArray<string | number> = ["0", "12", "-3", "9007199254740993", "-9223372036854775808", 42, "123456789012345", "9223372036854775807"];
const UINT64S: ReadonlyArray<string | number> = ["18446744073709551615", "0", "7", "9007199254740993", 1234];
const DOUBLES: readonly number[] = [30, 3.5, 0, 0.001, 123456.75, -2];
const INT32S: readonly number[] = [1299, 0, -5, 2147483647];
const YEARS: readonly number[] = [2026, 1970, 1999, 2100];
const FRACTIONS: readonly string[] = ["", ".6", ".125", ".123456789"];
const DURATIONS: readonly string[] = ["90s", "0.5s", "1.000000001s", "-2s", "0s", "3600s"];
const NAMES: readonly string[] = ["Bench claw hammer", "Warm-up record", "Hammer \u2013 caf\u00e9", ""];

/** The `i`th value of `list`, taken in turn. */
const nth = <T>(list: readonly T[], i: number): T => list[i % list.length]!;

/** The request of call `i`: every field set, each taking the values above in turn, lists and maps of changing length. */
export function echoRecord(i: number): string {
  const month = (i % 12) + 1;
  const time = `${nth(YEARS, i)}-${String(month).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}T0${i % 10}:04:05${nth(FRACTIONS, i)}Z`;
  return JSON.stringify({
    id: `warmup-${i}`,
    displayName: nth(NAMES, i),
    count: nth(INT64S, i),
    serial: nth(UINT64S, i),
    kind: i % 2 === 0 ? "KIND_SMALL" : "KIND_LARGE",
    tags: Array.from({ length: i % 5 }, (_, t) => `tag-${t}`),
    counts: { north: nth(INT64S, i + 1), south: nth(INT64S, i + 2), ...(i % 2 === 0 ? { east: nth(INT64S, i + 3) } : {}) },
    size: { width: nth(DOUBLES, i), height: nth(DOUBLES, i + 1) },
    ...(i % 2 === 0 ? { cents: nth(INT32S, i) } : { quote: "on request" }),
    updatedAt: time,
    leadTime: nth(DURATIONS, i),
    attributes: { color: "red", weight: nth(DOUBLES, i), fragile: i % 2 === 0, dims: [1, 2.5, i], extra: null, nested: { a: "b" } },
    blob: Buffer.from(`blob-${"x".repeat(i % 4)}`).toString("base64"),
    note: "handle with care",
    level: i % 7,
    active: i % 2 === 1,
    ratio: nth(DOUBLES, i + 2),
    sizes: Array.from({ length: i % 3 }, (_, k) => ({ width: nth(DOUBLES, i + k), height: nth(DOUBLES, k) })),
  });
}

/** An invoke's reply as both fronts carry it. */
interface EchoReply {
  success?: boolean;
  status?: string;
  message?: string;
  response_data?: string;
}

/** Throws unless `r` is the successful echo of call `i`, naming the call (`what`) and the reply's status. */
export function checkEcho(what: string, r: EchoReply, i: number): void {
  if (!r.success || JSON.parse(r.response_data ?? "{}").id !== `warmup-${i}`) throw new Error(`warm-up ${what} ${i} failed: ${r.status ?? "?"} ${(r.message ?? "").slice(0, 200)}`);
}

/**
 * Run `call(0)` .. `call(calls - 1)`, the first calls in LANES lanes and the last SERIAL_SHARE of them one at a time;
 * rejects with the first failure.
 */
export async function inLanes(calls: number, call: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const laned = calls - Math.floor(calls * SERIAL_SHARE);
  await Promise.all(
    Array.from({ length: LANES }, async () => {
      while (next < laned) await call(next++);
    }),
  );
  while (next < calls) await call(next++);
}

/**
 * `calls` JSON invokes of the echo backend through REST invoke-json on 127.0.0.1:`httpPort` with `key`, in LANES
 * lanes over kept-alive connections. Rejects on the first call that does not come back as a successful echo.
 */
export async function restInvokes(httpPort: number, key: string, calls: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: LANES });
  const call = (i: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      // Every other body has its keys sorted, as clients that sort them send it (Go's encoding/json for a map,
      // Python's sort_keys): the parsed body then has the other hidden class, which the REST handler's loads also see.
      const record = echoRecord(i);
      const body = i % 2 === 0 ? JSON.stringify({ service: ECHO_BACKEND, method: "Echo", request_data: record }) : JSON.stringify({ method: "Echo", request_data: record, service: ECHO_BACKEND });
      const req = request({ host: "127.0.0.1", port: httpPort, method: "POST", path: "/v1/gateway/invoke-json", agent, timeout: CALL_TIMEOUT_MS, headers: { "content-type": "application/json", "x-api-key": key } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          try {
            if (res.statusCode !== 200) throw new Error(`warm-up invoke-json ${i} answered ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 200)}`);
            checkEcho("invoke-json", JSON.parse(Buffer.concat(chunks).toString()) as EchoReply, i);
            resolve();
          } catch (e) {
            reject(e);
          }
        });
        res.on("error", reject);
      });
      req.on("timeout", () => req.destroy(new Error(`warm-up invoke-json ${i} timed out`)));
      req.on("error", reject);
      req.end(body);
    });
  try {
    await inLanes(calls, call);
  } finally {
    agent.destroy();
  }
}

/** The echo backend's schema, as reflection would give it. */
function echoSchema(): ReflectionResult {
  return { files: warmupEchoProtos().files, services: [ECHO_SERVICE], version: "v1" };
}

/** What a warm-up through the gateway's own objects touches, and puts back after it (`ownWarmup`). */
export interface OwnWarmupParts {
  readonly dispatch: Pick<DispatchFacility, "hideBackend">;
  readonly metrics: Pick<Metrics, "beginWarmup">;
  readonly tracer: Pick<Tracer, "beginWarmup">;
}

/**
 * Run `calls` (the warm-up's invokes through this thread's own servers) with the echo backend on 127.0.0.1:`echoPort`
 * served by `parts.dispatch` as a hidden backend, then leave nothing of it: the backend dropped, the metrics as they
 * were before (Metrics.beginWarmup), the spans thrown away (Tracer.beginWarmup). Bounded by OWN_WARMUP_TIMEOUT_MS: past
 * it the backend is dropped at once, so the calls still in flight fail, and they are given SETTLE_MS to end before the
 * metrics are put back. Resolves with what `calls` resolved; rejects with its failure or the bound's.
 */
export async function ownWarmup<R>(parts: OwnWarmupParts, echoPort: number, calls: () => Promise<R>, timeoutMs = OWN_WARMUP_TIMEOUT_MS): Promise<R> {
  const drop = parts.dispatch.hideBackend(ECHO_BACKEND, echoPort, echoSchema());
  const forget = parts.metrics.beginWarmup();
  const endSpans = parts.tracer.beginWarmup();
  const running = calls();
  try {
    return await within(running, timeoutMs, () => new GatewayError(Code.DEADLINE_EXCEEDED, `warm-up did not finish within ${timeoutMs} ms`));
  } finally {
    drop();
    await settleWithin(running.catch(() => undefined), SETTLE_MS);
    forget(ECHO_BACKEND);
    endSpans();
  }
}

/** A key the gateway's authenticator accepts for its own warm-up calls: its first API key (any, when it has none). */
export function ownWarmupKey(apiKeys: readonly string[]): string {
  return apiKeys[0] ?? "warmup";
}

/** What a uWS thread's warm-up needs of the thread. */
export interface ThreadWarmupDeps {
  /** The thread's conversion-pool slots (its real facility's, used one after the other). */
  slots: WorkerSlots;
  /** The private facilities' logger: errors only, into the thread's log. */
  logger: Logger;
  /** Stands in for the runtime, which the thread does not own. */
  runtime: Runtime;
  /** Told of each private REST server while it is open, and of undefined once it closed: the thread closes it if it must exit meanwhile. */
  track(server: RestServer | undefined): void;
}

/**
 * A uWS thread's warm-up, before it listens on the gateway's port: `w.calls` REST invokes to the main thread's echo
 * backend through two private dispatch facilities in turn (FIRST_SHARE), each with its own REST server on a 127.0.0.1
 * ephemeral port, random API key, metrics that nothing reads and, when the gateway traces, a tracer exporting to the
 * dropping receiver at the same sampler. Resolves with the calls made; rejects (closing what it opened) on the first
 * call that fails or past THREAD_WARMUP_TIMEOUT_MS.
 */
export async function warmUpThread(w: ThreadWarmup, real: ValidatedOptions, deps: ThreadWarmupDeps): Promise<number> {
  const first = Math.floor(w.calls * FIRST_SHARE);
  const run = async (): Promise<number> => {
    if (first > 0) await privateInvokes(w, real, deps, first);
    await privateInvokes(w, real, deps, w.calls - first);
    return w.calls;
  };
  return within(run(), THREAD_WARMUP_TIMEOUT_MS, () => new GatewayError(Code.DEADLINE_EXCEEDED, `thread warm-up did not finish within ${THREAD_WARMUP_TIMEOUT_MS} ms`));
}

/** One private facility and REST server: `calls` REST invokes through it, then it closes. */
async function privateInvokes(w: ThreadWarmup, real: ValidatedOptions, deps: ThreadWarmupDeps, calls: number): Promise<void> {
  const key = randomBytes(16).toString("hex");
  const opts = validateGatewayOptions({
    services: [{ name: ECHO_BACKEND, grpc: { host: "127.0.0.1", port: w.echoPort } }],
    host: "127.0.0.1",
    grpcPort: 0,
    httpPort: 0,
    apiKeys: [key],
    threads: 1,
    conversionWorkers: real.conversionWorkers,
    logLevel: "error",
    ...(w.tracesEndpoint
      ? { otlpTracesEndpoint: w.tracesEndpoint, otlpTracesProtocol: real.otlpTracesProtocol, traceSampler: real.traceSampler, traceSamplerArg: real.traceSamplerArg, traceExportDelayMs: 100 }
      : {}),
  });
  const { logger } = deps;
  const metrics = createMetrics({ processMetrics: false, otlpEndpoint: "" });
  const tracer = createTracer({ ...tracerOptions(opts), logger });
  const { isClosing } = new ClosingFlag();
  const ctx: GatewayContext = { options: opts, services: await loadRegistry(opts), runtime: deps.runtime, logger, metrics, tracer, isClosing };
  const schema = echoSchema();
  const dispatch = createDispatchFacility(ctx, { slots: deps.slots, schemaSource: async () => schema });
  const routes = dispatch.routes ?? [];
  dispatch.transcoding.reserve(routes);
  let rest: RestServer | undefined;
  try {
    rest = await startRestServer(
      opts.host,
      0,
      [...routes],
      gatewayServerDeps(opts, { auth: createAuthenticator(opts.apiKeys), logger, metrics, isClosing, appHooks: dispatch.appHooks ?? [], dynamic: dispatch.transcoding.routes }),
    );
    deps.track(rest);
    await dispatch.start?.();
    await restInvokes(rest.port, key, calls);
  } finally {
    rest?.closeAll();
    deps.track(undefined);
    dispatch.destroy?.();
    await settleWithin(tracer.close(), TRACE_FLUSH_MS);
  }
}
