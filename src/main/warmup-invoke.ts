import type * as grpc from "@grpc/grpc-js";
import { NativeGrpcServer } from "../grpc/native/server.js";
import { createH2Server } from "../h2/server.js";
import type { UnaryCall } from "../grpc/native/call-types.js";
import type { H2ServerSession } from "../h2/types.js";
import { addReflectionService } from "../grpc/reflection-service.js";
import { gatewayPackageDefinition, warmupEchoProtos } from "../shared/protos.js";
import { CALL_TIMEOUT_MS, ECHO_BACKEND, ECHO_SERVICE, checkEcho, echoRecord, inLanes, restInvokes } from "../threads/warmup.js";
import type { WarmupClient } from "./warmup-client.js";

/**
 * The invoke half of the warm-up (docs/warmup.md): JSON invokes through the private gateway to a backend in this
 * process, so V8 has compiled the invoke path (the front, schema lookup, JSON <-> protobuf conversion, the backend
 * call) before the first client. The backend is proto/platform/warmup/echo.proto on the gateway's own gRPC server
 * code, with reflection, on a loopback ephemeral port: the private gateway finds its method through reflection, as
 * it finds a real backend's.
 */

/**
 * One call in this many, the echo backend PINGs every connection it has. grpc-go's server PINGs its client after
 * reading DATA, for its window estimate (BDP), so the gateway's backend connections answer PINGs from a real backend,
 * and hold the ACKs on a timer: without these, that path ran for the first time at the first real calls.
 */
const PING_EVERY_CALLS = 4;
const PING_PAYLOAD = Buffer.from("warmupbd");

/** One gRPC invoke in this many carries no deadline. */
const NO_DEADLINE_EVERY = 4;

/** The echo backend: answers each Echo call with its request. */
export async function startEchoBackend(): Promise<{ port: number; close(): void }> {
  const { pkg, files } = warmupEchoProtos();
  const sessions = new Set<H2ServerSession>();
  // It greets and answers as grpc-go's server does, so the backend client has met that before a real backend's first
  // reply: its header blocks indexed and Huffman-coded (the client's HPACK decoding of dynamic table entries and Huffman
  // strings deoptimized at a real backend's first reply), and its SETTINGS naming MAX_FRAME_SIZE (the client stores
  // it, and a field V8 had seen stored only once was tracked as a constant: the first store from a real backend threw
  // away the compiled code that read it).
  const server = new NativeGrpcServer({
    onSession: (s) => sessions.add(s),
    onSessionClose: (s) => sessions.delete(s),
    transport: (o) => createH2Server({ ...o, headerEncoding: "indexed", announceMaxFrameSize: true }),
  });
  let calls = 0;
  const echo = async (call: UnaryCall<unknown>): Promise<unknown> => {
    if (++calls % PING_EVERY_CALLS === 0) for (const s of sessions) s.ping(PING_PAYLOAD);
    return call.request;
  };
  server.addService(pkg[ECHO_SERVICE] as grpc.ServiceDefinition, { Echo: echo });
  addReflectionService(server, { files, services: [ECHO_SERVICE] });
  const port = await server.listen("127.0.0.1", 0);
  return { port, close: () => server.forceShutdown() };
}

/**
 * `calls` JSON invokes of the echo backend through the private gateway's gRPC InvokeJson, and as many through its REST
 * invoke-json when `rest` (the real gateway serves REST on its main thread only with `--threads 1`; with more threads
 * each uWS thread, an isolate of its own, warms up its REST path itself: src/threads/warmup.ts). Each in LANES lanes; each gRPC call under a deadline
 * that changes from call to call, but one in NO_DEADLINE_EVERY with none. Rejects on the first call that does not come back as a successful echo.
 */
export async function invokeEcho(client: WarmupClient, httpPort: number, calls: number, rest: boolean): Promise<number> {
  const method = (gatewayPackageDefinition()["platform.Gateway"] as grpc.ServiceDefinition)["InvokeJson"]!;
  const s = client.session();
  await inLanes(calls, async (i) => {
    const body = method.requestSerialize({ service: ECHO_BACKEND, method: "Echo", request_data: echoRecord(i) });
    // One call in NO_DEADLINE_EVERY carries no deadline, as many clients' calls do: the call's `deadline` field then holds
    // both kinds of value before the first client (a field that had only held numbers deoptimized the handler at the
    // first call without one: "not a heap number").
    const reply = await client.unary(s, "/platform.Gateway/InvokeJson", body, i % NO_DEADLINE_EVERY === 0 ? undefined : CALL_TIMEOUT_MS - (i % 1000));
    checkEcho("InvokeJson", method.responseDeserialize(reply) as Parameters<typeof checkEcho>[1], i);
  });
  if (rest) await restInvokes(httpPort, client.key, calls);
  return rest ? 2 * calls : calls;
}
