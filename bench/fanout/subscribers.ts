/**
 * Subscriber process of the fan-out bench: opens `streams` Subscribe calls over `connections` HTTP/2 connections to
 * `address`, counts deliveries and records publish-to-delivery latency from the `ts-<ns>` marker the publisher puts
 * in each event id (process.hrtime is CLOCK_MONOTONIC, shared by every process on the machine). Talks over IPC.
 */
import * as grpc from "@grpc/grpc-js";

const [address, topic, streamsArg, connectionsArg] = process.argv.slice(2);
const streams = Number(streamsArg);
const connections = Number(connectionsArg);
const raw = (b: Buffer): Buffer => b;
const def = {
  Subscribe: { path: "/io.cloudevents.v1.Pubsub/Subscribe", requestStream: false, responseStream: true, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw },
} as unknown as grpc.ServiceDefinition;
const Client = grpc.makeGenericClientConstructor(def, "Pubsub");
// SubscribeRequest {topics: [topic]} by hand: field 1, length-delimited.
const req = Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(topic!)]), Buffer.from(topic!)]);
const MARK = Buffer.from("ts-");

let headers = 0;
let delivered = 0;
let ended = 0;
const latencies: number[] = [];
const clients: grpc.Client[] = [];
const calls: grpc.ClientReadableStream<Buffer>[] = [];
for (let c = 0; c < connections; c++) clients.push(new Client(address!, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1, "grpc.max_receive_message_length": -1 }));
for (let i = 0; i < streams; i++) {
  const call = (clients[i % connections] as unknown as { Subscribe(r: Buffer): grpc.ClientReadableStream<Buffer> }).Subscribe(req);
  call.on("metadata", () => headers++);
  call.on("data", (b: Buffer) => {
    delivered++;
    // Sample latency on a subset of streams to keep the subscriber's own cost low. Stream i is on connection
    // i % connections: 97 is prime, so the sample spans every connection (i % 50 sampled only the first of 50).
    if (i % 97 === 0) {
      const at = b.indexOf(MARK);
      if (at >= 0) {
        let end = at + 3;
        while (end < b.length && b[end]! >= 0x30 && b[end]! <= 0x39) end++;
        latencies.push(Number(process.hrtime.bigint() - BigInt(b.toString("latin1", at + 3, end))) / 1000);
      }
    }
  });
  call.on("error", () => undefined);
  call.on("status", () => ended++);
  calls.push(call);
}
process.on("message", (m: { cmd: string }) => {
  if (m.cmd === "stats") process.send!({ headers, delivered, ended, latencies: latencies.splice(0) });
  if (m.cmd === "close") {
    for (const c of calls) c.cancel();
    for (const c of clients) c.close();
    setTimeout(() => process.exit(0), 50);
  }
});
