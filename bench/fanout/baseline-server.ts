/**
 * The fan-out baseline: a plain grpc-js server with no broker. Subscribe calls are kept in a list; each PublishEvent
 * encodes the SubscribeResponse once and writes the same Buffer to every stream (identity serializer), queueing per
 * stream while write() returns false. Prints `{"grpcPort": n}` on stdout when listening.
 */
import * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";

const pkg = gatewayPackageDefinition();
const svc = pkg["io.cloudevents.v1.Pubsub"] as unknown as Record<string, grpc.MethodDefinition<unknown, unknown>>;
const encode = svc["Subscribe"]!.responseSerialize as (v: unknown) => Buffer;
const def = { ...svc, Subscribe: { ...svc["Subscribe"]!, responseSerialize: (b: unknown) => b as Buffer } } as unknown as grpc.ServiceDefinition;

interface Out {
  call: grpc.ServerWritableStream<unknown, Buffer>;
  queue: Buffer[];
  writable: boolean;
}
const outs = new Set<Out>();
const server = new grpc.Server({ "grpc.max_send_message_length": -1 });
server.addService(def, {
  Subscribe(call: grpc.ServerWritableStream<unknown, Buffer>) {
    const o: Out = { call, queue: [], writable: true };
    outs.add(o);
    call.sendMetadata(new grpc.Metadata());
    call.on("drain", () => {
      o.writable = true;
      while (o.writable && o.queue.length) o.writable = call.write(o.queue.shift()!);
    });
    call.on("cancelled", () => outs.delete(o));
  },
  PublishEvent(call: grpc.ServerUnaryCall<{ topic: string; cloudevent: unknown }, unknown>, cb: grpc.sendUnaryData<unknown>) {
    const bytes = encode({ topic: call.request.topic, cloudevent: call.request.cloudevent });
    for (const o of outs) {
      if (o.writable && o.queue.length === 0) o.writable = o.call.write(bytes);
      else o.queue.push(bytes);
    }
    cb(null, { status: { success: true, status: "OK", message: "" } });
  },
  Unsubscribe(_call: unknown, cb: grpc.sendUnaryData<unknown>) {
    cb(null, { status: { success: false, status: "NOT_FOUND", message: "" } });
  },
});
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(JSON.stringify({ grpcPort: port, msg: "gateway listening" }) + "\n");
});
