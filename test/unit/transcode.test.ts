import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { parseTemplate } from "../../src/backends/http-rules.js";
import { buildSchema } from "../../src/backends/schema.js";
import { createServiceRegistry } from "../../src/config/services.js";
import { createLogger } from "../../src/observe/logger.js";
import { createRouteTrie, type MatchResult } from "../../src/ops/transcode/match.js";
import { createTranscodeTable } from "../../src/ops/transcode/table.js";
import { transcodeRequest } from "../../src/ops/transcode/request.js";
import { transcodeResponse } from "../../src/ops/transcode/response.js";
import { createAuthenticator } from "../../src/ops/auth.js";
import { createRouteTable, json, type DynamicRoutes } from "../../src/http/router.js";
import { encodedFileDescriptorProtos, fileDescriptorProtos, LIBRARY_PROTO, SHOP_PROTO } from "../support/protos/descriptors.js";
import { HELP, parseCli } from "../../src/main/cli-args.js";
import { validateGatewayOptions } from "../../src/config/options.js";

function trie(rules: Array<[string, string]>) {
  const t = createRouteTrie<string>();
  for (const [m, p] of rules) assert.equal(t.add(m, parseTemplate(p), `${m} ${p}`), undefined, `${m} ${p} added`);
  return t;
}

const hit = (r: MatchResult<string>): { entry: string; values: readonly string[] } => {
  assert.ok(r && "match" in r, `expected a match, got ${JSON.stringify(r)}`);
  return r.match;
};

test("literal segments beat variables, and * beats **, at every segment", () => {
  const t = trie([
    ["GET", "/v1/books/{id}"],
    ["GET", "/v1/books/special"],
    ["GET", "/v1/{rest=**}"],
    ["GET", "/v1/books/{id}/pages/{page}"],
    ["GET", "/v1/{a}/{b}/pages/7"],
  ]);
  assert.deepEqual(hit(t.match("GET", "/v1/books/special")), { entry: "GET /v1/books/special", values: [] });
  assert.deepEqual(hit(t.match("GET", "/v1/books/42")), { entry: "GET /v1/books/{id}", values: ["42"] });
  assert.deepEqual(hit(t.match("GET", "/v1/shelves/1/books")), { entry: "GET /v1/{rest=**}", values: ["shelves/1/books"] });
  assert.deepEqual(hit(t.match("GET", "/v1/books/1/pages/7")), { entry: "GET /v1/books/{id}/pages/{page}", values: ["1", "7"] });
  // Backtracking: the literal branch fails deeper, the variable branch matches.
  assert.deepEqual(hit(t.match("GET", "/v1/x/y/pages/7")), { entry: "GET /v1/{a}/{b}/pages/7", values: ["x", "y"] });
  assert.deepEqual(hit(t.match("GET", "/v1")), { entry: "GET /v1/{rest=**}", values: [""] });
});

test("a :verb rule is tried first; without one the colon is part of the segment", () => {
  const t = trie([
    ["POST", "/v1/{name=books/*}:archive"],
    ["POST", "/v1/{name=books/*}"],
    ["GET", "/v1/{name=books/*}"],
  ]);
  assert.deepEqual(hit(t.match("POST", "/v1/books/1:archive")), { entry: "POST /v1/{name=books/*}:archive", values: ["books/1"] });
  assert.deepEqual(hit(t.match("POST", "/v1/books/1:other")), { entry: "POST /v1/{name=books/*}", values: ["books/1:other"] });
  assert.deepEqual(hit(t.match("GET", "/v1/books/1:archive")), { entry: "GET /v1/{name=books/*}", values: ["books/1:archive"] });
  assert.deepEqual(hit(t.match("POST", "/v1/books/1:")), { entry: "POST /v1/{name=books/*}", values: ["books/1:"] });
});

test("percent-decoding: a single-segment variable decodes everything, a multi-segment one keeps %2F; bad encoding is INVALID_ARGUMENT", () => {
  const t = trie([
    ["GET", "/v1/one/{id}"],
    ["GET", "/v1/many/{path=**}"],
    ["GET", "/v1/{name=shelves/*}/x"],
  ]);
  assert.deepEqual(hit(t.match("GET", "/v1/one/a%2Fb%20c")).values, ["a/b c"]);
  assert.deepEqual(hit(t.match("GET", "/v1/many/a%2Fb/c%2fd/%C3%A9")).values, ["a%2Fb/c%2fd/é"]);
  assert.deepEqual(hit(t.match("GET", "/v1/shelves/s%201/x")).values, ["shelves/s 1"]);
  // Literals compare with the raw segment: an encoded literal is another segment.
  assert.equal(t.match("GET", "/v1/%6Fne/1"), undefined);
  assert.throws(
    () => t.match("GET", "/v1/one/%E0%A4%A"),
    (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT,
  );
});

test("trailing slash as grpc-gateway: one more, empty, segment", () => {
  const t = trie([
    ["GET", "/v1/books"],
    ["GET", "/v1/shelves/{id}"],
  ]);
  assert.equal(t.match("GET", "/v1/books/"), undefined);
  assert.deepEqual(hit(t.match("GET", "/v1/shelves/")).values, [""]);
});

test("another method on a matching path is 405 with the methods it has; the same shape twice is a conflict", () => {
  const t = trie([
    ["GET", "/v1/{name=books/*}"],
    ["DELETE", "/v1/{name=books/*}"],
  ]);
  assert.deepEqual(t.match("POST", "/v1/books/1"), { allowed: ["GET", "DELETE"] });
  assert.equal(t.add("GET", parseTemplate("/v1/{other=books/*}"), "second"), "GET /v1/{name=books/*}");
  assert.equal(t.add("GET", parseTemplate("/v1/{name=books/*}:verb"), "with verb"), undefined);
  assert.equal(t.add("PATCH", parseTemplate("/v1/{book.name=books/*}"), "patch"), undefined);
  assert.equal(t.size, 4);
});

function libraryTable() {
  const files = encodedFileDescriptorProtos(LIBRARY_PROTO);
  const schema = buildSchema(files, ["library.v1.Messaging", "library.v1.Library"], "library");
  const table = createTranscodeTable({ services: createServiceRegistry([{ name: "library", grpc: { host: "127.0.0.1", port: 1 } }], "pubsub"), logger: createLogger("silent") });
  table.sync("library", schema);
  return { table, schema };
}

function request(method: string, path: string, body = ""): unknown {
  return requestOn(libraryTable().table, method, path, body);
}

/** The request message JSON `table` makes of an HTTP request. */
function requestOn(table: ReturnType<typeof createTranscodeTable>, method: string, path: string, body: string): unknown {
  const q = path.indexOf("?");
  const m = table.match(method, q < 0 ? path : path.slice(0, q));
  assert.ok(m && "match" in m, `${method} ${path} matches`);
  return JSON.parse(transcodeRequest(m.match.entry, m.match.values, new URLSearchParams(q < 0 ? "" : path.slice(q + 1)), Buffer.from(body)));
}

test("query parameters become typed JSON: ints, 64-bit as strings, bools as Go parses them, enums, repeated, nested, WKTs", () => {
  assert.deepEqual(request("GET", "/v1/shelves/s/books?page_size=%2B5&include_archived=T&ids=-1&ids=2&min_rating=1e3&genre=3&filter.pages.max=9&minPages=4"), {
    parent: "shelves/s",
    page_size: 5,
    include_archived: true,
    ids: ["-1", "2"],
    min_rating: 1000,
    genre: 3,
    filter: { pages: { max: 9 } },
    min_pages: 4,
  });
  assert.deepEqual(request("GET", "/v1/shelves/s/books?max_age=-0.5s&read_mask=a_b.c_d,e&cursor=_-8%3D"), { parent: "shelves/s", max_age: "-0.5s", read_mask: "aB.cD,e", cursor: "_-8=" });
  assert.throws(() => request("GET", "/v1/shelves/s/books?page_size=2147483648"), /query parameter page_size is out of range/);
  assert.throws(() => request("GET", "/v1/shelves/s/books?ids=1.5"), /query parameter ids must be an integer/);
  assert.throws(() => request("GET", "/v1/shelves/s/books?min_rating=abc"), /query parameter min_rating must be a number/);
  assert.throws(() => request("GET", "/v1/shelves/s/books?filter.nope=1"), /query parameter filter.nope is not a field of library.v1.Filter/);
  assert.throws(() => request("GET", "/v1/shelves/s/books?tags.x=1"), /query parameter tags.x is not a field path: tags is not a message/);
  assert.throws(() => request("GET", "/v1/shelves/s/books?max_age=5x"), /must be a duration/);
});

test("bodies: field spliced as written, * passed through or merged with the path, query refused on a * rule", () => {
  assert.deepEqual(request("POST", "/v1/shelves/s/books?request_id=r", '{"title":"T"}'), { book: { title: "T" }, parent: "shelves/s", request_id: "r" });
  // The FieldMask names what the body set (grpc-gateway's patch feature), the path-bound name included.
  assert.deepEqual(request("PATCH", "/v1/shelves/s/books/b", '{"title":"T","name":"other"}'), { book: { title: "T", name: "shelves/s/books/b" }, update_mask: "name,title" });
  assert.deepEqual(request("PATCH", "/v4/messages/m", '{"text":"x","message_id":"body"}'), { text: "x", message_id: "m" });
  assert.throws(() => request("POST", "/v1/shelves/s/books/b:archive?reason=x", "{}"), /query parameter reason sets nothing: the request body is the whole message/);
  assert.throws(() => request("POST", "/v1/shelves/s/books", "[1,"), /request body is not valid JSON/);
  assert.throws(() => request("POST", "/v1/shelves/s/books?book.title=x", "{}"), /query parameter book.title is set by the request body/);
});

test("response_body selects one field, with its default when the backend left it unset", () => {
  const { table } = libraryTable();
  const m = table.match("GET", "/v1/shelves/s/titles");
  assert.ok(m && "match" in m);
  assert.equal(transcodeResponse(m.match.entry, '{"titles":["a"],"count":1}'), '["a"]');
  assert.equal(transcodeResponse(m.match.entry, '{"count":0}'), "[]");
});

test("a rule that would shadow a gateway route is refused; the router asks the table only after its own routes", () => {
  const { table } = libraryTable();
  table.reserve([{ method: "GET", path: "/v1/{name+}" }]);
  assert.ok(table.refused().some((p) => p.startsWith("GET /v1/files/{path=**} (library library.v1.Library.GetFile) is refused: it would shadow the gateway's own route GET /v1/{name+}")), table.refused().join("\n"));
  table.reserve([{ method: "GET", path: "/v1/gateway/list-services" }]);
  const dynamic: DynamicRoutes = {
    resolve(method, path) {
      const m = table.match(method, path);
      if (m === undefined || "allowed" in m) return m;
      return { route: { method: "GET", path: m.match.entry.label, handler: async () => json({}) }, params: {} };
    },
  };
  const resolve = createRouteTable([{ method: "GET", path: "/v1/gateway/list-services", handler: async () => json({}) }], { auth: createAuthenticator([]), isClosing: () => false, dynamic });
  assert.equal(resolve("GET", "/v1/gateway/list-services", {}).route?.path, "/v1/gateway/list-services");
  assert.equal(resolve("GET", "/v1/shelves/1/books/2", {}).route?.path, "/v1/{name=shelves/*/books/*}");
  assert.equal(resolve("POST", "/v1/shelves/1/books/2", {}).reply?.status, 405);
  assert.equal(resolve("GET", "/nowhere", {}).reply?.status, 404);
});

test("--schema-refresh-interval / GATEWAY_SCHEMA_REFRESH_INTERVAL_MS: periodic reflection; default 0 (off)", () => {
  assert.deepEqual(parseCli(["--schema-refresh-interval", "60000"], { GATEWAY_SCHEMA_REFRESH_INTERVAL_MS: "5" }), { schemaRefreshIntervalMs: 60000 });
  assert.deepEqual(parseCli([], { GATEWAY_SCHEMA_REFRESH_INTERVAL_MS: "1000" }), { schemaRefreshIntervalMs: 1000 });
  assert.equal(validateGatewayOptions({}).schemaRefreshIntervalMs, 0);
  assert.throws(() => validateGatewayOptions({ schemaRefreshIntervalMs: -1 }), /schemaRefreshIntervalMs/);
  assert.match(HELP, /--schema-refresh-interval <ms> .*\n.* GATEWAY_SCHEMA_REFRESH_INTERVAL_MS \(default 0: on reconnect only\)/);
});

test("query and path values: Durations in Go's form too, enum numbers only when the enum has them", () => {
  const age = (v: string): unknown => (request("GET", `/v1/shelves/s/books?max_age=${encodeURIComponent(v)}`) as Record<string, unknown>)["max_age"];
  // Go's time.ParseDuration forms, as grpc-gateway reads them, to proto3 JSON's.
  assert.equal(age("13h"), "46800s");
  assert.equal(age("13h0m0s"), "46800s");
  assert.equal(age("1h30m"), "5400s");
  assert.equal(age("300ms"), "0.300s");
  assert.equal(age("2us"), "0.000002s");
  assert.equal(age("2\u00b5s"), "0.000002s");
  assert.equal(age("1ns"), "0.000000001s");
  assert.equal(age("-5m"), "-300s");
  assert.equal(age("+1.5h"), "5400s");
  assert.equal(age(".5s"), "0.500s");
  assert.equal(age("0"), "0s");
  // proto3 JSON's own form passes as written.
  assert.equal(age("-0.5s"), "-0.5s");
  for (const bad of ["", "5", "1d", "h", ".s", "1h 2m", "9999999999h", "1.5"]) {
    assert.throws(() => request("GET", `/v1/shelves/s/books?max_age=${encodeURIComponent(bad)}`), /query parameter max_age must be a duration/, JSON.stringify(bad));
  }
  assert.equal((request("GET", "/v1/shelves/s/books?genre=2") as Record<string, unknown>)["genre"], 2);
  assert.equal((request("GET", "/v1/shelves/s/books?genre=0") as Record<string, unknown>)["genre"], 0);
  assert.throws(() => request("GET", "/v1/shelves/s/books?genre=7"), /query parameter genre must be a value of library.v1.Genre \(GENRE_UNSPECIFIED, GENRE_FICTION, GENRE_HISTORY, GENRE_POETRY\) or its number, got '7'/);
  assert.throws(() => request("GET", "/v1/shelves/s/books?genre=-1"), /query parameter genre must be a value of library.v1.Genre/);
});

/**
 * A backend whose PATCH body is a message with every kind of field (nested message, repeated, map, Struct, Any,
 * Timestamp, Empty) and a request with one FieldMask: hand-built descriptors, the well-known types from the shop set.
 */
function patchTable() {
  const wkt = fileDescriptorProtos(SHOP_PROTO).filter((f) => f.name.startsWith("google/protobuf/"));
  const T = FieldDescriptorProto_Type;
  const L = FieldDescriptorProto_Label;
  const field = (name: string, number: number, type: FieldDescriptorProto_Type, typeName = "", label = L.OPTIONAL) => ({ name, number, type, typeName, label, jsonName: name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase()) });
  const file = create(FileDescriptorProtoSchema, {
    name: "patch/v1/patch.proto",
    package: "patch.v1",
    syntax: "proto3",
    dependency: ["google/protobuf/struct.proto", "google/protobuf/any.proto", "google/protobuf/timestamp.proto", "google/protobuf/field_mask.proto", "google/protobuf/empty.proto"],
    messageType: [
      { name: "Inner", field: [field("a_b", 1, T.STRING), field("n", 2, T.INT32), field("deeper", 3, T.MESSAGE, ".patch.v1.Inner")] },
      {
        name: "Outer",
        field: [
          field("title", 1, T.STRING),
          field("inner", 2, T.MESSAGE, ".patch.v1.Inner"),
          field("list", 3, T.MESSAGE, ".patch.v1.Inner", L.REPEATED),
          field("labels", 4, T.MESSAGE, ".patch.v1.Outer.LabelsEntry", L.REPEATED),
          field("meta", 5, T.MESSAGE, ".google.protobuf.Struct"),
          field("any", 6, T.MESSAGE, ".google.protobuf.Any"),
          field("at", 7, T.MESSAGE, ".google.protobuf.Timestamp"),
          field("nothing", 8, T.MESSAGE, ".google.protobuf.Empty"),
        ],
        nestedType: [{ name: "LabelsEntry", field: [field("key", 1, T.STRING), field("value", 2, T.STRING)], options: { mapEntry: true } }],
      },
      { name: "PatchRequest", field: [field("id", 1, T.STRING), field("outer", 2, T.MESSAGE, ".patch.v1.Outer"), field("update_mask", 3, T.MESSAGE, ".google.protobuf.FieldMask")] },
    ],
    service: [{ name: "Patcher", method: [{ name: "Patch", inputType: ".patch.v1.PatchRequest", outputType: ".patch.v1.Outer" }] }],
  });
  const files = [...wkt, file].map((f) => toBinary(FileDescriptorProtoSchema, f));
  const schema = buildSchema(files, ["patch.v1.Patcher"], "patch");
  const rule = (httpMethod: string) => ({ httpMethod, path: "/v1/things/{id}", body: "outer", responseBody: "", additionalBindings: [] });
  const apiRules = new Map([["patch.v1.Patcher.Patch", { ...rule("PATCH"), additionalBindings: [rule("PUT")] }]]);
  const services = createServiceRegistry([{ name: "patch", grpc: { host: "127.0.0.1", port: 1 }, transcoding: { enabled: true, prefix: "", errors: "grpc-gateway", apiRules } }], "pubsub");
  const table = createTranscodeTable({ services, logger: createLogger("silent") });
  table.sync("patch", schema);
  assert.deepEqual(table.refused(), []);
  return (method: string, path: string, body: string) => requestOn(table, method, path, body) as Record<string, unknown>;
}

test("PATCH fills an unset FieldMask from the body's keys, as grpc-gateway's FieldMaskFromRequestBody", () => {
  const call = patchTable();
  const mask = (body: string, path = "/v1/things/1"): unknown => call("PATCH", path, body)["update_mask"];
  // Leaves by proto name (a JSON name is taken too), nested messages followed down, sorted; the mask is written in
  // proto3 JSON's FieldMask form (lowerCamel: inner.a_b is inner.aB), which the converter reads back to proto names.
  assert.equal(mask('{"title":"t","inner":{"aB":"x","deeper":{"n":1}}}'), "inner.aB,inner.deeper.n,title");
  // A repeated or map field ends its path; an empty object or a non-object value (a Timestamp, null) is a leaf.
  assert.equal(mask('{"list":[{"n":1}],"labels":{"k":"v"},"inner":{},"at":"2024-01-01T00:00:00Z","nothing":{},"title":null}'), "at,inner,labels,list,nothing,title");
  // Struct: its JSON keys, as they are, down to each non-object value; Any ends its path and needs "@type".
  assert.equal(mask('{"meta":{"a":1,"b":{"c_d":true,"e":{}}},"any":{"@type":"type.googleapis.com/google.protobuf.Empty"}}'), "any,meta.a,meta.b.cD");
  assert.throws(() => mask('{"any":{"value":1}}'), (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT && /request body field any \(google.protobuf.Any\) has no "@type"/.test(e.message));
  // A key the message does not have adds nothing (the converter refuses the body for it).
  assert.equal(mask('{"title":"t","nope":1}'), "title");
  // Given in the query: left as given; given empty: filled.
  assert.equal(mask('{"title":"t"}', "/v1/things/1?update_mask=inner.n"), "inner.n");
  assert.equal(mask('{"title":"t"}', "/v1/things/1?update_mask="), "title");
  // No keys, or not an object: no mask.
  assert.equal(mask("{}"), undefined);
  assert.equal(mask("[1]"), undefined);
  // Only PATCH: a PUT binding of the same method leaves the mask alone.
  assert.equal(call("PUT", "/v1/things/1", '{"title":"t"}')["update_mask"], undefined);
});
