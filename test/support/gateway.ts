import { Writable } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { createGateway, type Gateway, type GatewayOverrides } from "../../src/main/gateway.js";
import type { GatewayOptions } from "../../src/config/options.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";

/** A gateway on ephemeral ports with its log lines captured, and helpers to call it. */
export interface TestGateway {
  gateway: Gateway;
  /** e.g. "http://127.0.0.1:40123" */
  http: string;
  /** e.g. "127.0.0.1:40124" */
  grpcAddress: string;
  /** Parsed JSON log lines so far. */
  logs: Array<Record<string, unknown>>;
  /** A generic grpc-js client for one of the gateway's services, e.g. "platform.State" (closed by close()). */
  client(service: string): grpc.Client;
  /**
   * close() the gateway and every client made here, then assert it released everything: zero broker subscribers,
   * calls and requests in flight, open streams, sockets and gRPC connections (Gateway.resources()), as connect-es's
   * useNodeServer checks its server after each suite. Rejects naming each counter that stayed above zero.
   */
  close(): Promise<void>;
}

/** Start a gateway for a test: ports 0, logs captured (also echoed when GATEWAY_TEST_LOGS=1). */
export async function startTestGateway(options: GatewayOptions = {}, overrides?: GatewayOverrides): Promise<TestGateway> {
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (!line) continue;
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          logs.push({ raw: line });
        }
        if (process.env["GATEWAY_TEST_LOGS"]) process.stderr.write(line + "\n");
      }
      cb();
    },
  });
  // One HTTP thread unless a test asks for more: starting worker threads costs every test; test/integration/threads.test.ts
  // runs the threaded front.
  const gateway = await createGateway({ grpcPort: 0, httpPort: 0, logLevel: "debug", logDestination: sink, threads: 1, ...options }, overrides);
  const clients: grpc.Client[] = [];
  const grpcAddress = `127.0.0.1:${gateway.grpcPort}`;
  return {
    gateway,
    http: `http://127.0.0.1:${gateway.httpPort}`,
    grpcAddress,
    logs,
    client(service) {
      const Ctor = grpc.makeGenericClientConstructor(gatewayPackageDefinition()[service] as grpc.ServiceDefinition, service);
      const c = new Ctor(grpcAddress, grpc.credentials.createInsecure());
      clients.push(c);
      return c;
    },
    async close() {
      for (const c of clients) c.close();
      await gateway.close();
      await assertReleased(gateway);
    },
  };
}

/** How long sockets closed by close() may take to report it (their 'close' events come a few turns later). */
const RELEASE_WAIT_MS = 2000;

/** Reject unless every Gateway.resources() counter reaches zero within RELEASE_WAIT_MS of close(). */
async function assertReleased(gateway: Gateway): Promise<void> {
  const held = (): string[] => Object.entries(gateway.resources()).flatMap(([k, v]) => (v === 0 ? [] : [`${k}=${v}`]));
  const end = Date.now() + RELEASE_WAIT_MS;
  while (held().length > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  const left = held();
  if (left.length > 0) throw new Error(`the gateway still holds resources ${RELEASE_WAIT_MS} ms after close(): ${left.join(", ")}`);
}

/** Call a unary method on a generic client; resolves the response or rejects with the grpc-js ServiceError. */
export function unary<Res = any>(client: grpc.Client, method: string, request: object, metadata = new grpc.Metadata(), options: grpc.CallOptions = {}): Promise<Res> {
  return new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, Function>)[method];
    if (!fn) return reject(new Error(`no method ${method} on client`));
    fn.call(client, request, metadata, options, (err: grpc.ServiceError | null, res: Res) => (err ? reject(err) : resolve(res)));
  });
}

/** Metadata with an x-api-key. */
export function withKey(key: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("x-api-key", key);
  return md;
}

/** Resolve when `predicate` holds, polling every 5 ms; reject after `timeoutMs` with `what` in the message. */
export async function waitFor(predicate: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
