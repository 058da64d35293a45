import { Agent, request } from "node:http";
import type * as grpc from "@grpc/grpc-js";
import { NativeGrpcServer } from "../grpc/native/server.js";
import type { UnaryCall } from "../grpc/native/call-types.js";
import { addReflectionService } from "../grpc/reflection-service.js";
import { gatewayPackageDefinition, warmupEchoProtos } from "../shared/protos.js";
import type { WarmupClient } from "./warmup-client.js";

/**
 * The invoke half of the warm-up (docs/warmup.md): JSON invokes through the private gateway to a backend in this
 * process, so V8 has compiled the invoke path (the front, schema lookup, JSON <-> protobuf conversion, the backend
 * call) before the first client. The backend is proto/platform/warmup/echo.proto on the gateway's own gRPC server
 * code, with reflection, on a loopback ephemeral port: the private gateway finds its method through reflection, as
 * it finds a real backend's.
 */

/** The service name the private gateway registers the echo backend under. */
export const ECHO_BACKEND = "warmup-echo";
const ECHO_SERVICE = "platform.warmup.v1.Echo";
/** Calls in flight at once on each front: a few, as a client pool keeps them. */
const LANES = 4;
/** Each call's deadline is this less 0..999 ms: it changes from call to call, as a client's does. */
const CALL_TIMEOUT_MS = 30_000;

/** The echo backend: answers each Echo call with its request. */
export async function startEchoBackend(): Promise<{ port: number; close(): void }> {
  const { pkg, files } = warmupEchoProtos();
  const server = new NativeGrpcServer();
  server.addService(pkg[ECHO_SERVICE] as grpc.ServiceDefinition, { Echo: async (call: UnaryCall<unknown>) => call.request });
  addReflectionService(server, { files, services: [ECHO_SERVICE] });
  const port = await server.listen("127.0.0.1", 0);
  return { port, close: () => server.forceShutdown() };
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
function record(i: number): string {
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

/**
 * `calls` JSON invokes of the echo backend through the private gateway's gRPC InvokeJson, and as many through its REST
 * invoke-json when `rest` (the real gateway serves REST on its main thread only with `--threads 1`; with more threads
 * REST runs in other isolates, which this warm-up cannot reach). Each in LANES lanes; each gRPC call under a deadline
 * that changes from call to call. Rejects on the first call that does not come back as a successful echo.
 */
export async function invokeEcho(client: WarmupClient, httpPort: number, calls: number, rest: boolean): Promise<number> {
  const method = (gatewayPackageDefinition()["platform.Gateway"] as grpc.ServiceDefinition)["InvokeJson"]!;
  const check = (what: string, r: { success?: boolean; status?: string; message?: string; response_data?: string }, i: number): void => {
    if (!r.success || JSON.parse(r.response_data ?? "{}").id !== `warmup-${i}`) throw new Error(`warm-up ${what} ${i} failed: ${r.status ?? "?"} ${(r.message ?? "").slice(0, 200)}`);
  };
  const s = client.session();
  const grpcCall = async (i: number): Promise<void> => {
    const body = method.requestSerialize({ service: ECHO_BACKEND, method: "Echo", request_data: record(i) });
    const reply = await client.unary(s, "/platform.Gateway/InvokeJson", body, CALL_TIMEOUT_MS - (i % 1000));
    check("InvokeJson", method.responseDeserialize(reply) as Parameters<typeof check>[1], i);
  };
  const agent = new Agent({ keepAlive: true, maxSockets: LANES });
  const restCall = (i: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ service: ECHO_BACKEND, method: "Echo", request_data: record(i) });
      const req = request({ host: "127.0.0.1", port: httpPort, method: "POST", path: "/v1/gateway/invoke-json", agent, timeout: CALL_TIMEOUT_MS, headers: { "content-type": "application/json", "x-api-key": client.key } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          try {
            if (res.statusCode !== 200) throw new Error(`warm-up invoke-json ${i} answered ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 200)}`);
            check("invoke-json", JSON.parse(Buffer.concat(chunks).toString()), i);
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
  const lanes = async (call: (i: number) => Promise<void>): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: LANES }, async () => {
        while (next < calls) await call(next++);
      }),
    );
  };
  try {
    await lanes(grpcCall);
    if (rest) await lanes(restCall);
  } finally {
    agent.destroy();
  }
  return rest ? 2 * calls : calls;
}
