/**
 * Run by test/unit/hidden-maps.test.ts under `node --allow-natives-syntax`: for each hot class whose fields take a
 * timestamp, two instances, one of them through the operation that stores the timestamp, and whether V8 still gives
 * both the same hidden map. Prints one JSON object {class: boolean}.
 */
import type net from "node:net";
import { FrameWriter } from "../../src/h2/server-writer.js";
import { Subscriber } from "../../src/broker/subscriber.js";
import { ConnectionTimers } from "../../src/h2/server-lifecycle.js";
import { NativeGrpcServer } from "../../src/grpc/native/server.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import type { ServiceDefinition } from "@grpc/grpc-js";

const haveSameMap = new Function("a", "b", "return %HaveSameMap(a, b)") as (a: object, b: object) => boolean;

const socket = { destroyed: false, writable: true, writableLength: 0, write: () => true, cork() {}, uncork() {} } as unknown as net.Socket;
const owner = { flushed() {}, flushFailed() {} };
const held = new FrameWriter(socket, owner);
const idle = new FrameWriter(socket, owner);
// A PING's ACK held for a later write (its time stored), and a flush (its time stored).
held.pingAck(Buffer.alloc(8), 0, false);
held.buffer(Buffer.from("x"));
await new Promise((r) => setImmediate(r));

const sink = { write: () => true, open() {}, end() {} };
const blocked = new Subscriber("a", ["t"], sink, 4);
const flowing = new Subscriber("b", ["t"], sink, 4);
// The broker's sweep marks a blocked subscriber with the epoch ms it first saw it so.
blocked.sweepMarkAt = Date.now();

const host = { ping() {}, fail() {}, retire() {}, finalGoaway() {}, resetAll() {}, destroy() {} };
const cfg = { settingsAckTimeoutMs: 0, idleTimeoutMs: 0, keepaliveTimeMs: 0, keepaliveTimeoutMs: 0, maxConnectionAgeMs: 0, maxConnectionAgeGraceMs: 0, headerBlockTimeoutMs: 0 };
const pinged = new ConnectionTimers(host as never, cfg as never);
const quiet = new ConnectionTimers(host as never, cfg as never);
// The keepalive timer stores when it sent its PING.
pinged.pingSentAt = performance.now();

// Routes: every method of every server in the process, whether bound by addService or register, has one map.
const pubsub = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as ServiceDefinition;
const routesOf = (s: NativeGrpcServer): Map<string, object> => (s as unknown as { handlers: Map<string, object> }).handlers;
const first = new NativeGrpcServer();
const second = new NativeGrpcServer();
first.addService(pubsub, { PublishEvent: async () => ({}) });
second.addService(pubsub, { PublishEvent: async () => ({}), Subscribe: () => {} });
second.register("/proxied.Service/Method", { kind: "unary", serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b, async handle() { return Buffer.alloc(0); } });
const publish = routesOf(first).get("/io.cloudevents.v1.Pubsub/PublishEvent")!;
const routes = [...routesOf(first).values(), ...routesOf(second).values()];

process.stdout.write(
  JSON.stringify({
    FrameWriter: haveSameMap(held, idle),
    Subscriber: haveSameMap(blocked, flowing),
    ConnectionTimers: haveSameMap(pinged, quiet),
    Routes: routes.length === 2 * Object.keys(pubsub).length + 1 && routes.every((r) => haveSameMap(r, publish)),
  }),
);
process.exit(0);
