// Generates what the code needs from the .proto files, into src/gen/ (gitignored); `npm run build` and
// `npm run typecheck` run it first, and scripts/build-if-needed.mjs (`npm start`) too. Quiet and a few ms when
// nothing changed: a hash of every input is kept in src/gen/.stamp.
//
//   src/gen/gateway/**  TypeScript types of the gateway's protos (proto-loader-gen-types, LOADER_OPTIONS' shapes)
//   src/gen/dapr/**     the same for the Dapr runtime and app callback protos shipped in @dapr/dapr
//   src/gen/reflection/** types of grpc.reflection v1 (v1alpha has the same shapes), with the options the
//                       reflection service and client load it with (keepCase, oneofs, no defaults)
//   src/gen/protos.ts   GATEWAY_DESCRIPTOR_SET: `buf build` of the gateway's protos (a binary FileDescriptorSet,
//                       imports included, dependencies first), for reflection and @bufbuild/protobuf;
//                       GATEWAY_LOADER_JSON / DAPR_LOADER_JSON: the protobufjs JSON proto-loader's `fromJSON`
//                       builds grpc-js's codecs from (see docs/conversion.md "Generated code" for why not the set)
//   test/support/protos/gen/shop.binpb  `buf build` of the test protos (test/support/protos/descriptors.ts)
//   test/support/protos/gen/kinds.binpb `buf build` of kinds/v1/kinds.proto (every field kind, fast-codec test)
//   test/support/protos/gen/library.binpb `buf build` of library/v1/library.proto (google.api.http annotations, with
//                       source info), googleapis' annotations.proto and http.proto taken from google-proto-files
//   test/support/protos/gen/bookstore.binpb the same for bookstore/v1/bookstore.proto (Envoy's transcoder examples)
//
// Usage: node scripts/gen-protos.mjs [--force]
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));
const out = join(root, "src", "gen");
const testOut = join(root, "test", "support", "protos", "gen");
const stampFile = join(out, ".stamp");

const protoDir = join(root, "proto");
const testProtoDir = join(root, "test", "support", "protos");
const daprProtoDir = join(dirname(require.resolve("@dapr/dapr/package.json")), "proto");
// The Docker build stage copies no test/: generate the test schema only where its protos are.
const withTests = existsSync(testProtoDir);

/** The gateway's own proto files (written to src/gen/protos.ts as GATEWAY_PROTO_FILES for the tests). */
const GATEWAY_FILES = [
  "io/cloudevents/v1/cloudevents.proto",
  "platform/status.proto",
  "platform/gateway.proto",
  "platform/state.proto",
  "platform/config.proto",
  "platform/trigger.proto",
];
/** The warm-up's echo backend (src/main/warmup-invoke.ts): not a gateway API, kept out of GATEWAY_FILES' set. */
const WARMUP_FILES = ["platform/warmup/echo.proto"];
/** The Dapr files the adapter loads (src/runtime/dapr/protos.ts). */
const DAPR_FILES = ["dapr/proto/runtime/v1/dapr.proto", "dapr/proto/runtime/v1/appcallback.proto"];
/** proto-loader-gen-types flags matching LOADER_OPTIONS (keepCase, longs String, enums String, defaults, oneofs). */
const TYPE_FLAGS = ["--keepCase", "--longs=String", "--enums=String", "--defaults", "--oneofs", "--grpcLib=@grpc/grpc-js", "--importFileExtension=.js"];

function protoFiles(dir) {
  const found = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        if (p !== testOut) walk(p);
      } else if (e.name.endsWith(".proto")) found.push(p);
    }
  };
  walk(dir);
  return found;
}

function inputsHash() {
  const h = createHash("sha256");
  h.update(readFileSync(fileURLToPath(import.meta.url)));
  for (const pkg of ["@grpc/proto-loader", "@bufbuild/buf", "@dapr/dapr", ...(withTests ? ["google-proto-files"] : [])]) h.update(pkg + require(`${pkg}/package.json`).version);
  for (const f of [...protoFiles(protoDir), ...(withTests ? protoFiles(testProtoDir) : []), ...protoFiles(daprProtoDir)]) {
    h.update(relative(root, f));
    h.update(readFileSync(f));
  }
  return h.digest("hex");
}

const outputs = [join(out, "protos.ts"), join(out, "gateway"), join(out, "dapr"), join(out, "reflection"), ...(withTests ? [join(testOut, "shop.binpb"), join(testOut, "kinds.binpb"), join(testOut, "library.binpb"), join(testOut, "bookstore.binpb")] : [])];
const hash = inputsHash();
if (!process.argv.includes("--force") && existsSync(stampFile) && readFileSync(stampFile, "utf8") === hash && outputs.every((p) => existsSync(p))) {
  process.exit(0);
}
process.stderr.write("platform-gateway: generating src/gen/ from the .proto files (scripts/gen-protos.mjs)\n");

/** `buf build` of `files` (relative to `dir`) as a binary FileDescriptorSet, imports included. */
function bufBuild(dir, files, { sourceInfo = false } = {}) {
  const buf = require.resolve("@bufbuild/buf/bin/buf");
  const args = ["build", dir, ...(sourceInfo ? [] : ["--exclude-source-info"]), "--as-file-descriptor-set", "-o", "-"];
  for (const f of files) args.push("--path", join(dir, f));
  // --as-file-descriptor-set: a plain FileDescriptorSet (no buf image extensions), dependencies before dependents.
  return execFileSync(buf, args, { cwd: root, maxBuffer: 64 << 20, stdio: ["ignore", "pipe", "inherit"] });
}

/**
 * `buf build` (with source info, so comments reach reflection) of a test proto importing google/api/annotations.proto:
 * built in a scratch folder holding the file and googleapis' annotations.proto and http.proto from google-proto-files.
 */
function annotatedBuild(file) {
  const scratch = mkdtempSync(join(tmpdir(), "gen-protos-"));
  try {
    const googleapis = dirname(require.resolve("google-proto-files/package.json"));
    for (const f of [file, "google/api/annotations.proto", "google/api/http.proto"]) {
      mkdirSync(join(scratch, dirname(f)), { recursive: true });
      copyFileSync(join(f.startsWith("google/") ? googleapis : testProtoDir, f), join(scratch, f));
    }
    return bufBuild(scratch, [file], { sourceInfo: true });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The protobufjs JSON of `files` loaded exactly as proto-loader's `loadSync` loads them (its own protobufjs, its
 * include-path resolver, google/protobuf/* from protobufjs's bundled definitions), so `fromJSON` at run time yields
 * the codecs and object shapes `loadSync` did, without parsing .proto text in the process.
 */
function loaderJson(dir, files) {
  const protobuf = createRequire(require.resolve("@grpc/proto-loader"))("protobufjs");
  const r = new protobuf.Root();
  const original = r.resolvePath;
  r.resolvePath = (origin, target) => {
    if (isAbsolute(target)) return target;
    const full = join(dir, target);
    try {
      accessSync(full);
      return full;
    } catch {
      return original(origin, target);
    }
  };
  r.loadSync(files, { keepCase: true });
  r.resolveAll();
  return JSON.stringify(r.toJSON());
}

function genTypes(dir, files, to, flags = TYPE_FLAGS) {
  rmSync(to, { recursive: true, force: true });
  const bin = require.resolve("@grpc/proto-loader/build/bin/proto-loader-gen-types.js");
  execFileSync(process.execPath, [bin, ...flags, "-I", dir, "-O", to, ...files], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
  // The per-file root types (e.g. gateway/status.ts, a file without services) declare a helper and import grpc-js
  // without using them, which `noUnusedLocals` refuses: drop what is unused, so the generated code is type-checked
  // like the rest.
  const tidy = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) tidy(p);
      else if (e.name.endsWith(".ts")) {
        let text = readFileSync(p, "utf8");
        const before = text;
        if (text.split("SubtypeConstructor").length === 2) text = text.replace(/type SubtypeConstructor<[^]*?\n};\n/, "");
        if (!/\bgrpc\./.test(text)) text = text.replace("import type * as grpc from '@grpc/grpc-js';\n", "");
        if (text !== before) writeFileSync(p, text);
      }
    }
  };
  tidy(to);
}

mkdirSync(out, { recursive: true });
genTypes(protoDir, GATEWAY_FILES, join(out, "gateway"));
genTypes(daprProtoDir, DAPR_FILES, join(out, "dapr"));
genTypes(protoDir, ["grpc/reflection/v1/reflection.proto"], join(out, "reflection"), ["--keepCase", "--oneofs", "--grpcLib=@grpc/grpc-js", "--importFileExtension=.js"]);
const gatewaySet = bufBuild(protoDir, GATEWAY_FILES);
const warmupSet = bufBuild(protoDir, WARMUP_FILES);
// buf checks that the Dapr protos compile too; the adapter only needs their proto-loader JSON.
bufBuild(daprProtoDir, DAPR_FILES);
if (withTests) {
  mkdirSync(testOut, { recursive: true });
  writeFileSync(join(testOut, "shop.binpb"), bufBuild(testProtoDir, ["shop/v1/shop.proto"]));
  writeFileSync(join(testOut, "kinds.binpb"), bufBuild(testProtoDir, ["kinds/v1/kinds.proto"]));
  writeFileSync(join(testOut, "library.binpb"), annotatedBuild("library/v1/library.proto"));
  writeFileSync(join(testOut, "bookstore.binpb"), annotatedBuild("bookstore/v1/bookstore.proto"));
}
writeFileSync(
  join(out, "protos.ts"),
  [
    "// Generated by scripts/gen-protos.mjs from proto/ and @dapr/dapr's protos. Do not edit; `npm run build` regenerates it.",
    "",
    "/** The gateway's own .proto files, relative to proto/: what the rest of this module was built from. */",
    `export const GATEWAY_PROTO_FILES: readonly string[] = ${JSON.stringify(GATEWAY_FILES)};`,
    "",
    "/** `buf build` of the gateway's protos: a binary google.protobuf.FileDescriptorSet, base64, dependencies first. */",
    `export const GATEWAY_DESCRIPTOR_SET = ${JSON.stringify(gatewaySet.toString("base64"))};`,
    "",
    "/** The gateway's protos as protobufjs JSON, for proto-loader's `fromJSON` (same codecs as `loadSync`). */",
    `export const GATEWAY_LOADER_JSON = ${JSON.stringify(loaderJson(protoDir, GATEWAY_FILES))};`,
    "",
    "/** The warm-up's echo backend (proto/platform/warmup/echo.proto): `buf build` as above, and protobufjs JSON. */",
    `export const WARMUP_DESCRIPTOR_SET = ${JSON.stringify(warmupSet.toString("base64"))};`,
    `export const WARMUP_LOADER_JSON = ${JSON.stringify(loaderJson(protoDir, WARMUP_FILES))};`,
    "",
    "/** Dapr's runtime and app callback protos (from @dapr/dapr) as protobufjs JSON, for proto-loader's `fromJSON`. */",
    `export const DAPR_LOADER_JSON = ${JSON.stringify(loaderJson(daprProtoDir, DAPR_FILES))};`,
    "",
  ].join("\n"),
);
writeFileSync(stampFile, hash);
