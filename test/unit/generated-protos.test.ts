import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { loadSync, type PackageDefinition } from "@grpc/proto-loader";
import { daprPackageDefinition } from "../../src/runtime/dapr/protos.js";
import { GATEWAY_PROTO_FILES } from "../../src/gen/protos.js";
import { protoDir } from "../../src/shared/paths.js";
import { gatewayFileDescriptors, gatewayPackageDefinition, gatewayRegistry, LOADER_OPTIONS } from "../../src/shared/protos.js";


/** The `type` descriptor proto-loader derived for every message and method of a package definition. */
function shapes(pkg: PackageDefinition): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [name, def] of Object.entries(pkg)) {
    if ("format" in def) out.set(name, (def as { type: unknown }).type);
    else for (const [m, md] of Object.entries(def)) out.set(`${name}/${m}`, [md.path, md.requestStream, md.responseStream, md.requestType.type, md.responseType.type]);
  }
  return out;
}

describe("generated protos (scripts/gen-protos.mjs)", () => {
  it("gives grpc-js the codecs and object shapes loadSync gave from the .proto files (gateway)", () => {
    const parsed = loadSync([...GATEWAY_PROTO_FILES], { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
    const generated = shapes(gatewayPackageDefinition());
    assert.deepEqual([...generated.keys()].sort(), [...shapes(parsed).keys()].sort());
    for (const [name, shape] of shapes(parsed)) assert.deepEqual(generated.get(name), shape, name);
    // A round trip through the generated codec keeps proto-loader's shapes (maps, oneof names, int64 as string).
    const publish = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"]!["PublishEvent" as never] as { requestSerialize(v: unknown): Buffer; requestDeserialize(b: Buffer): unknown };
    const event = { id: "1", source: "s", spec_version: "1.0", type: "t", attributes: { time: { ce_timestamp: { seconds: "12", nanos: 5 } } }, text_data: "x" };
    const back = publish.requestDeserialize(publish.requestSerialize({ topic: "t", cloudevent: event })) as { cloudevent: Record<string, unknown> };
    assert.deepEqual(back.cloudevent["attributes"], { time: { ce_timestamp: { seconds: "12", nanos: 5 }, attr: "ce_timestamp" } });
    assert.equal(back.cloudevent["data"], "text_data");
  });

  it("gives the Dapr adapter the codecs and object shapes loadSync gave from @dapr/dapr's protos", () => {
    const dir = join(dirname(createRequire(import.meta.url).resolve("@dapr/dapr/package.json")), "proto");
    const parsed = loadSync(["dapr/proto/runtime/v1/dapr.proto", "dapr/proto/runtime/v1/appcallback.proto"], { ...LOADER_OPTIONS, includeDirs: [dir] });
    const generated = shapes(daprPackageDefinition());
    assert.deepEqual([...generated.keys()].sort(), [...shapes(parsed).keys()].sort());
    for (const [name, shape] of shapes(parsed)) assert.deepEqual(generated.get(name), shape, name);
  });

  it("serves buf's FileDescriptorProtos: one per file, real names, dependencies first", () => {
    const files = gatewayFileDescriptors().map((b) => fromBinary(FileDescriptorProtoSchema, b));
    const names = files.map((f) => f.name);
    assert.deepEqual([...names].sort(), [...GATEWAY_PROTO_FILES, "google/protobuf/any.proto", "google/protobuf/timestamp.proto"].sort());
    files.forEach((f, i) => {
      for (const dep of f.dependency) assert.ok(names.indexOf(dep) < i, `${f.name} comes after its dependency ${dep}`);
    });
    assert.deepEqual(files.find((f) => f.name === "platform/state.proto")?.dependency, ["io/cloudevents/v1/cloudevents.proto", "platform/status.proto"]);
    for (const s of ["platform.Gateway", "platform.State", "platform.Config", "platform.Trigger", "io.cloudevents.v1.Pubsub"]) assert.ok(gatewayRegistry().getService(s), s);
  });

  it("regenerates nothing, silently, when the protos have not changed", () => {
    const repo = fileURLToPath(new URL("../..", import.meta.url));
    const script = join(repo, "scripts", "gen-protos.mjs");
    execFileSync(process.execPath, [script], { cwd: repo, stdio: "pipe" }); // up to date from here on
    const before = statSync(join(repo, "src", "gen", "protos.ts")).mtimeMs;
    const r = spawnSync(process.execPath, [script], { cwd: repo, encoding: "utf8" });
    assert.deepEqual([r.status, r.stdout, r.stderr], [0, "", ""]);
    assert.equal(statSync(join(repo, "src", "gen", "protos.ts")).mtimeMs, before);
  });
});
