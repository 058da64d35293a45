/**
 * Baseline of bench/invoke/proxy-cpu.ts: the bare grpc-js pass-through proxy of /work/shared/peers/node/passthru-proxy.cjs
 * (its logic copied, pointed at the order test backend's unary methods): identity (de)serializers, each call's request
 * bytes sent to the backend on one grpc-js client with makeUnaryRequest and the reply bytes returned as they are. No
 * auth, no metadata forwarding, no deadline: the floor of one Node gRPC hop. A child process: `tsx
 * bench/invoke/passthru-proxy.ts <backendPort>` sends `{ready: {port}}` over IPC and exits when the parent disconnects.
 */
import * as grpc from "@grpc/grpc-js";

const backend = `127.0.0.1:${process.argv[2]}`;
const id = (b: Buffer): Buffer => b;
const svc = "shop.v1.OrderService";
const def: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
const impl: grpc.UntypedServiceImplementation = {};
const client = new grpc.Client(backend, grpc.credentials.createInsecure());
for (const m of ["GetOrder", "PutOrder", "ListOrders"]) {
  const p = `/${svc}/${m}`;
  def[m] = { path: p, requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id };
  impl[m] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
    client.makeUnaryRequest(p, id, id, call.request, (err, resp) => cb(err, resp));
}
const server = new grpc.Server();
server.addService(def, impl);
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    console.error(err);
    process.exit(1);
  }
  process.send?.({ ready: { port } });
});
process.on("disconnect", () => process.exit(0));
