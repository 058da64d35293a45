import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { protoDir } from "../../src/shared/paths.js";

/** One request/response exchange on a server reflection stream (v1 or v1alpha). */
export function reflectionCall(address: string, version: "v1" | "v1alpha", request: object, md = new grpc.Metadata()): Promise<any> {
  const pkg = loadSync(`grpc/reflection/${version}/reflection.proto`, { keepCase: true, oneofs: true, includeDirs: [protoDir()] });
  const Ctor = grpc.makeGenericClientConstructor(pkg[`grpc.reflection.${version}.ServerReflection`] as grpc.ServiceDefinition, "ServerReflection");
  const client = new Ctor(address, grpc.credentials.createInsecure()) as unknown as {
    ServerReflectionInfo(md: grpc.Metadata): grpc.ClientDuplexStream<object, any>;
    close(): void;
  };
  return new Promise((resolve, reject) => {
    const call = client.ServerReflectionInfo(md);
    call.on("data", (res) => {
      resolve(res);
      call.end();
    });
    call.on("error", (e) => {
      client.close();
      reject(e);
    });
    call.on("end", () => client.close());
    call.write(request);
  });
}
