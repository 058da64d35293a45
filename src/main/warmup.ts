import { createServer, type Server } from "node:http";
import { constants, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { randomBytes } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../shared/protos.js";
import { GatewayError } from "../shared/gateway-error.js";
import { Code } from "../shared/code.js";
import { within } from "../shared/timers.js";
import type { GatewayOptions, ValidatedOptions } from "../config/options.js";
import { ECHO_BACKEND } from "../threads/warmup.js";
import { invokeEcho, startEchoBackend } from "./warmup-invoke.js";
import { WarmupClient } from "./warmup-client.js";

/**
 * The CLI's warm-up: events published, and JSON invokes made (src/main/warmup-invoke.ts), through private gateways
 * before the real one listens. V8 compiles a function with TurboFan only after it has run many times, so a fresh
 * process serves its first thousand or so events with the publish and fan-out path still interpreted or being
 * compiled, on the cores the deliveries need (BENCHMARKS.md, "Session 22"), and its first invokes are its slowest
 * ("Session 26"). The private gateways run the same code in the same isolate, so what they compile the real one uses.
 */
export const CLI_WARMUP_EVENTS = 1000;
export const CLI_WARMUP_CALLS = 1000;

/** Subscribers of the warm-up topic: some multiplexed on a connection, some on a connection each, as clients do. */
const MUX_CONNECTIONS = 2;
const STREAMS_PER_MUX_CONNECTION = 50;
const SINGLE_CONNECTIONS = 10;
const SUBSCRIBERS = MUX_CONNECTIONS * STREAMS_PER_MUX_CONNECTION + SINGLE_CONNECTIONS;
/** Bytes of each warm-up event's data: the size of a small JSON event. */
const EVENT_DATA_BYTES = 256;
/** Bound on the whole warm-up; past it the gateway starts cold. */
const WARMUP_TIMEOUT_MS = 30_000;
/** Each publish's deadline is the bound less 0..DEADLINE_STEPS-1 ms: it changes from call to call, as a client's does. */
const DEADLINE_STEPS = 1000;
/** Time for V8's background compiler to finish what the events so far queued. */
const COMPILE_SETTLE_MS = 100;
/**
 * One full garbage collection runs this many events before the end. Without it the real gateway started on a heap
 * the warm-up had filled, and each of 10,000 multiplexed subscribers measured 3.4-3.7 KB of RSS against 2.0-2.2 with
 * no warm-up. The collection frees the hidden maps of the objects each event makes and drops (protobufjs' messages
 * and writers, Node's write requests), and V8 throws away the code compiled against them, the publish path's among
 * it; 100 events after it did not get that code compiled again before the real gateway served, 300 do
 * (BENCHMARKS.md, "Session 22" and "Session 25").
 */
const EVENTS_AFTER_COLLECTION = 300;
/**
 * The events go through two private gateways in turn, this share of them through the first. Compiled code records
 * the functions it called: a gateway's own closures (its API key check, its handlers) are other functions to code
 * compiled while one private gateway served, so that code failed its checks at the real gateway's first calls
 * ("wrong call target") and was compiled again while serving. Once two instances have run, V8's feedback names the
 * closures' shared code instead of one instance's, and what the second compiles holds for the real gateway.
 */
const FIRST_GATEWAY_SHARE = 0.3;
/** Every this many events, each client connection sends a PING (grpc-go's clients do after their reads). */
const PING_EVERY = 10;
/** Time for the server to handle the subscribers' RST_STREAMs at the end. */
const CANCEL_SETTLE_MS = 20;

const TOPIC = "warmup";
const PUBSUB = "/io.cloudevents.v1.Pubsub";

/** What the warm-up uses of the private gateway (createGateway's, passed in by gateway.ts). */
interface PrivateGateway {
  readonly grpcPort: number;
  readonly httpPort: number;
  close(): Promise<void>;
}

/** What a warm-up did (logged by the gateway as `warmed up`). */
export interface WarmupReport {
  events: number;
  subscribers: number;
  deliveries: number;
  /** JSON invokes made through the private gateways (gRPC, and REST with one HTTP thread). */
  calls: number;
  ms: number;
  cpuMs: number;
  traced: boolean;
}

/**
 * Run `warmupEvents` events through the gRPC publish and fan-out path of two private gateways in turn
 * (FIRST_GATEWAY_SHARE), and `warmupCalls` JSON invokes to an echo backend in this process (the first gateway's before
 * its events, the second's after them), closing each. A private gateway is the embedded runtime on 127.0.0.1
 * ephemeral ports with a random API key, so nothing outside this process sees it: no sidecar, no Redis, none of the
 * real gateway's ports, metrics or logs (it logs errors only). When the real gateway traces, so do the private ones, at the same sampler, into a receiver in
 * this process that drops the spans.
 * `timeoutMs` bounds the whole warm-up (30 s; tests shorten it).
 */
export async function warmUp(opts: ValidatedOptions, start: (o: GatewayOptions) => Promise<PrivateGateway>, timeoutMs = WARMUP_TIMEOUT_MS): Promise<WarmupReport> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const key = randomBytes(16).toString("hex");
  let gw: PrivateGateway | undefined;
  /** Set once warmUp returns: a private gateway that finishes starting after that is closed at once. */
  let over = false;
  const sessions: ClientHttp2Session[] = [];
  let deliveries: number;
  let calls = 0;
  // REST runs in this isolate only with one HTTP thread; with more, each thread is an isolate of its own.
  const rest = opts.threads === 1;
  let backends: WarmupBackends | undefined;
  try {
    backends = await startWarmupBackends(opts);
    const { echoPort, tracesEndpoint } = backends;
    const startPrivate = async (): Promise<PrivateGateway> => {
      const started = await start({
        services: [{ name: "warmup", pubsub: { pubsubName: "warmup" } }, ...(echoPort !== undefined ? [{ name: ECHO_BACKEND, grpc: { host: "127.0.0.1", port: echoPort } }] : [])],
        host: "127.0.0.1",
        grpcPort: 0,
        httpPort: 0,
        apiKeys: [key],
        threads: 1,
        conversionWorkers: 1,
        logLevel: "error",
        ...(opts.logDestination ? { logDestination: opts.logDestination } : {}),
        ...(tracesEndpoint
          ? {
              otlpTracesEndpoint: tracesEndpoint,
              otlpTracesProtocol: opts.otlpTracesProtocol,
              traceSampler: opts.traceSampler,
              traceSamplerArg: opts.traceSamplerArg,
              traceExportDelayMs: 100,
            }
          : {}),
      });
      if (over) {
        await started.close();
        throw new GatewayError(Code.CANCELLED, "warm-up abandoned");
      }
      return (gw = started);
    };
    const run = async (): Promise<number> => {
      const first = Math.floor(opts.warmupEvents * FIRST_GATEWAY_SHARE);
      const firstCalls = Math.floor(opts.warmupCalls * FIRST_GATEWAY_SHARE);
      let delivered = 0;
      if (first > 0 || firstCalls > 0) {
        const a = await startPrivate();
        const client = new WarmupClient(`http://127.0.0.1:${a.grpcPort}`, key, sessions);
        if (firstCalls > 0) calls += await invokeEcho(client, a.httpPort, firstCalls, rest);
        if (first > 0) delivered += await publishAndDeliver(client, first, false);
        for (const s of sessions.splice(0)) s.destroy();
        gw = undefined;
        await a.close();
      }
      const b = await startPrivate();
      const client = new WarmupClient(`http://127.0.0.1:${b.grpcPort}`, key, sessions);
      if (opts.warmupEvents > first) delivered += await publishAndDeliver(client, opts.warmupEvents - first, true);
      // After the events, so their collection does not throw away what these calls compile.
      if (opts.warmupCalls > firstCalls) calls += await invokeEcho(client, b.httpPort, opts.warmupCalls - firstCalls, rest);
      return delivered;
    };
    // The bound's timer does not count as keeping the process up (the private gateway's sockets do): the gateway's own
    // calls unref their timers, and when theirs is the last one counted, Node takes a path of its own that the warm-up
    // must run too.
    deliveries = await within(run(), timeoutMs, () => new GatewayError(Code.DEADLINE_EXCEEDED, `warm-up did not finish within ${timeoutMs} ms`));
  } finally {
    over = true;
    for (const s of sessions) s.destroy();
    await (gw as PrivateGateway | undefined)?.close();
    await backends?.close();
  }
  // The private gateway is gone; V8's background compiler finishes what its last events queued.
  await new Promise((r) => setTimeout(r, COMPILE_SETTLE_MS));
  const cpu = process.cpuUsage(cpu0);
  return {
    events: opts.warmupEvents,
    subscribers: SUBSCRIBERS,
    deliveries,
    calls,
    ms: Math.round(performance.now() - t0),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    traced: Boolean(opts.otlpTracesEndpoint),
  };
}

/**
 * One full garbage collection. V8 offers it only as the `gc` global of `--expose-gc`: the flag is set just long
 * enough to take the function from a new context, so no script of the process (nor a thread started later) sees it.
 */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  try {
    (runInNewContext("gc") as () => void)();
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}

/**
 * Subscribe SUBSCRIBERS streams to the warm-up topic, publish `events` events one after another (each under a
 * deadline, as clients send them), and resolve with the deliveries once every subscriber has every event and has
 * reset its stream. The requests look like real clients' (WarmupClient, and a PING every PING_EVERY events). `collect`:
 * run the full collection EVENTS_AFTER_COLLECTION events before the end.
 */
async function publishAndDeliver(client: WarmupClient, events: number, collect: boolean): Promise<number> {
  const pubsub = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as grpc.ServiceDefinition;
  const opened: ClientHttp2Session[] = [];
  const session = (): ClientHttp2Session => {
    const s = client.session();
    opened.push(s);
    return s;
  };
  const expected = events * SUBSCRIBERS;
  let delivered = 0;
  let allDelivered: () => void = () => {};
  const done = new Promise<void>((resolve) => (allDelivered = resolve));
  const subscriptions: ClientHttp2Stream[] = [];
  const subscribe = (s: ClientHttp2Session): Promise<void> =>
    new Promise((resolve, reject) => {
      const st = client.call(s, `${PUBSUB}/Subscribe`, pubsub["Subscribe"]!.requestSerialize({ topics: [TOPIC] }));
      subscriptions.push(st);
      // Count whole gRPC messages: a 5-byte prefix, then the message. Not the server's MessageDecoder: a second
      // subclass of it in this isolate would make its hot call sites polymorphic for the real gateway.
      let pending: Buffer = Buffer.alloc(0);
      st.on("response", (headers) => (headers["grpc-status"] === undefined ? resolve() : reject(new Error(`warm-up subscribe ended: grpc-status ${String(headers["grpc-status"])}`))));
      st.on("data", (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
          pending = pending.subarray(5 + pending.readUInt32BE(1));
          if (++delivered === expected) allDelivered();
        }
      });
      st.on("error", reject);
    });
  for (let c = 0; c < MUX_CONNECTIONS; c++) {
    const s = session();
    await Promise.all(Array.from({ length: STREAMS_PER_MUX_CONNECTION }, () => subscribe(s)));
  }
  for (let c = 0; c < SINGLE_CONNECTIONS; c++) await subscribe(session());
  const publisher = session();
  const data = "x".repeat(EVENT_DATA_BYTES);
  const collectAt = collect ? Math.max(0, events - EVENTS_AFTER_COLLECTION) : -1;
  for (let i = 0; i < events; i++) {
    if (i === collectAt) {
      await new Promise((r) => setTimeout(r, COMPILE_SETTLE_MS));
      collectGarbage();
    }
    if (i % PING_EVERY === 0) for (const s of opened) s.ping(() => {});
    const req = pubsub["PublishEvent"]!.requestSerialize({
      topic: TOPIC,
      cloudevent: { id: `warmup-${i}`, source: "urn:platform-gateway:warmup", spec_version: "1.0", type: "platform.gateway.warmup", text_data: data },
    });
    await client.unary(publisher, `${PUBSUB}/PublishEvent`, req, WARMUP_TIMEOUT_MS - (i % DEADLINE_STEPS));
  }
  if (expected > 0) await done;
  // The subscribers leave as clients that unsubscribe do: each stream reset (RST_STREAM CANCEL), the connection kept.
  for (const st of subscriptions) {
    st.on("error", () => {});
    st.close(constants.NGHTTP2_CANCEL);
  }
  await new Promise((r) => setTimeout(r, CANCEL_SETTLE_MS));
  return delivered;
}

/** What the private gateways (and the uWS threads' warm-up, src/threads/warmup.ts) call and export to, in this process. */
export interface WarmupBackends {
  /** The echo backend's port on 127.0.0.1, when the warm-up makes invokes. */
  readonly echoPort?: number;
  /** The OTLP/HTTP traces URL of a receiver that drops every span, when the gateway traces. */
  readonly tracesEndpoint?: string;
  close(): Promise<void>;
}

/** The echo backend when `opts.warmupCalls` > 0, and the dropping span receiver when the gateway traces. */
export async function startWarmupBackends(opts: ValidatedOptions): Promise<WarmupBackends> {
  const echo = opts.warmupCalls > 0 ? await startEchoBackend() : undefined;
  let sink: Awaited<ReturnType<typeof startDroppingSink>> | undefined;
  try {
    sink = opts.otlpTracesEndpoint ? await startDroppingSink() : undefined;
  } catch (e) {
    echo?.close();
    throw e;
  }
  return {
    ...(echo ? { echoPort: echo.port } : {}),
    ...(sink ? { tracesEndpoint: `http://127.0.0.1:${sink.port}/v1/traces` } : {}),
    async close() {
      echo?.close();
      await sink?.close();
    },
  };
}

/** An OTLP/HTTP receiver on 127.0.0.1 that reads each export and answers 200, keeping nothing. */
async function startDroppingSink(): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
