import { test } from "node:test";
import assert from "node:assert/strict";
import type http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import {
  CALL_STREAM_SHAPE,
  DECOMPRESS_SHAPE,
  GRPC_JS_VERSION,
  HTTP2_SERVERS_SHAPE,
  callHttp2Stream,
  internalsProblem,
  serverHttp2Servers,
  wrapDecompressMessage,
} from "../../src/main/grpc/grpc-js-internals.js";
import { rawBytesMethod } from "../support/raw-methods.js";

// Each accessor of src/main/grpc/grpc-js-internals.ts against the real grpc-js: when an upgrade changes a private
// shape, the matching test fails with "grpc-js <version> changed <what>".

const service: grpc.ServiceDefinition = {
  Stream: rawBytesMethod("/t.T/Stream", { responseStream: true }),
  Unary: rawBytesMethod("/t.T/Unary"),
};

/** A grpc-js server with a pass-through interceptor (as the gateway's message timeout adds one) on 127.0.0.1:0. */
async function serve(impl: grpc.UntypedServiceImplementation): Promise<{ server: grpc.Server; client: grpc.Client; close(): void }> {
  const server = new grpc.Server({ interceptors: [(_m, call) => new grpc.ServerInterceptingCall(call)] });
  server.addService(service, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  const Ctor = grpc.makeGenericClientConstructor(service, "T");
  const client = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return { server, client, close: () => (client.close(), server.forceShutdown()) };
}

function frame(payload: string): Buffer {
  const body = Buffer.from(payload);
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

test("the grpc-js version is read from its package.json", () => {
  assert.match(GRPC_JS_VERSION, /^\d+\.\d+\.\d+/);
  assert.match(internalsProblem("X"), new RegExp(`^grpc-js ${GRPC_JS_VERSION.replace(/\./g, "\\.")} changed X`));
});

test("callHttp2Stream: a server call's HTTP/2 stream, and bytes written to it reach the client as gRPC messages", async () => {
  let found: ReturnType<typeof callHttp2Stream>;
  const s = await serve({
    Stream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      found = callHttp2Stream(call);
      call.sendMetadata(new grpc.Metadata());
      // What the Subscribe direct path does: pre-framed messages straight to the stream, then grpc-js's status.
      found?.write(frame("one"));
      found?.write(frame("two"));
      call.end();
    },
  });
  try {
    const got: string[] = [];
    const status = await new Promise<grpc.StatusObject>((resolve) => {
      const call = (s.client as unknown as { Stream(req: Buffer): grpc.ClientReadableStream<Buffer> }).Stream(Buffer.alloc(0));
      call.on("data", (b: Buffer) => got.push(b.toString()));
      call.on("error", () => undefined);
      call.on("status", resolve);
    });
    assert.ok(found, internalsProblem(CALL_STREAM_SHAPE));
    assert.equal(typeof found.writableNeedDrain, "boolean", internalsProblem(CALL_STREAM_SHAPE));
    assert.equal(status.code, grpc.status.OK);
    assert.deepEqual(got, ["one", "two"], "messages written to the HTTP/2 stream arrive before grpc-js's status");
  } finally {
    s.close();
  }
});

test("callHttp2Stream: undefined for an object that is not a grpc-js call", () => {
  assert.equal(callHttp2Stream({}), undefined);
  assert.equal(callHttp2Stream({ call: { nextCall: { stream: { close: 1 } } } }), undefined);
});

test("serverHttp2Servers: the node:http2 servers of a bound grpc-js Server, whose 'session' event sees each connection", async () => {
  const s = await serve({ Unary: (_call: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from("ok")) });
  try {
    const servers = serverHttp2Servers(s.server);
    assert.ok(servers && servers.length === 1, internalsProblem(HTTP2_SERVERS_SHAPE));
    const sessions: http2.ServerHttp2Session[] = [];
    servers[0]!.on("session", (session: http2.ServerHttp2Session) => sessions.push(session));
    const reply = await new Promise<Buffer>((resolve, reject) =>
      (s.client as unknown as Record<string, Function>)["Unary"]!.call(s.client, Buffer.alloc(0), (e: Error | null, r: Buffer) => (e ? reject(e) : resolve(r))),
    );
    assert.equal(reply.toString(), "ok");
    assert.equal(sessions.length, 1, `${internalsProblem(HTTP2_SERVERS_SHAPE)}: no 'session' event for the client's connection`);
  } finally {
    s.close();
  }
});

test("wrapDecompressMessage: grpc-js runs every request message through the wrapped decompressMessage", async () => {
  const seen: Array<{ flag: number; encoding: string }> = [];
  const wrapped = wrapDecompressMessage(
    (original) =>
      function (this: unknown, message: Buffer, encoding: string) {
        seen.push({ flag: message[0]!, encoding });
        return original.call(this, message, encoding);
      },
  );
  assert.ok(wrapped, internalsProblem(DECOMPRESS_SHAPE));
  const s = await serve({ Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
  try {
    const reply = await new Promise<Buffer>((resolve, reject) =>
      (s.client as unknown as Record<string, Function>)["Unary"]!.call(s.client, Buffer.from("echo"), (e: Error | null, r: Buffer) => (e ? reject(e) : resolve(r))),
    );
    assert.equal(reply.toString(), "echo", "the wrapper's result is the request the handler gets");
    assert.deepEqual(seen, [{ flag: 0, encoding: "identity" }], `${internalsProblem(DECOMPRESS_SHAPE)}: the wrapper never saw the request (or not as a prefixed message with its encoding)`);
  } finally {
    s.close();
  }
});
