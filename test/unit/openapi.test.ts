/**
 * The OpenAPI 3.1 document built from reflected descriptors: validated with a real OpenAPI validator, and read the
 * way a user reads it (paths, parameters, bodies, schemas, comments, security, the error shape).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Validator } from "@seriousme/openapi-schema-validator";
import { buildSchema } from "../../src/backends/schema.js";
import { buildOpenApiDocument, type OpenApiDocument } from "../../src/ops/openapi/document.js";
import { httpRulesOf } from "../../src/backends/http-rules.js";
import type { BackendSchema } from "../../src/backends/schema.js";
import type { OpenApiBinding } from "../../src/ops/openapi/document.js";
import { encodedFileDescriptorProtos, LIBRARY_PROTO, SHOP_PROTO } from "../support/protos/descriptors.js";

/** Every `google.api.http` binding of the schema at the root: what the transcoding table serves with no config. */
function annotatedBindings(_service: string, schema: BackendSchema): { bindings: OpenApiBinding[]; problems: ReadonlyArray<{ method: string; message: string }> } {
  const rules = httpRulesOf(schema.registry, schema.services);
  const bindings: OpenApiBinding[] = [];
  for (const [method, list] of rules.bindings) for (const binding of list) bindings.push({ method, binding, prefix: "" });
  return { bindings, problems: rules.problems };
}

type Obj = Record<string, any>;

const library = buildSchema(encodedFileDescriptorProtos(LIBRARY_PROTO), ["library.v1.Messaging", "library.v1.Library"], "library");
const shop = buildSchema(encodedFileDescriptorProtos(SHOP_PROTO), ["shop.v1.OrderService"], "orders");

function documentOf(service: string, schema: typeof library, apiKey = true): OpenApiDocument {
  return buildOpenApiDocument({ backends: [{ service, schema, ...annotatedBindings(service, schema) }], title: `docs ${service}`, apiKey });
}

async function assertValid(doc: unknown): Promise<void> {
  const v = new Validator();
  const r = await v.validate(doc as Obj);
  assert.equal(v.version, "3.1");
  assert.ok(r.valid, JSON.stringify(r.errors, null, 1));
}

const doc = documentOf("library", library);
const op = (method: string, path: string): Obj => {
  const o = (doc.paths[path] as Obj | undefined)?.[method];
  assert.ok(o, `${method} ${path} in ${Object.keys(doc.paths).join(", ")}`);
  return o;
};
const param = (o: Obj, name: string): Obj => {
  const p = (o["parameters"] as Obj[]).find((x) => x["name"] === name);
  assert.ok(p, `parameter ${name} of ${o["operationId"]}`);
  return p;
};
const schemas = (doc["components"] as Obj)["schemas"] as Obj;

describe("OpenAPI document of the annotated library API", () => {
  it("validates as OpenAPI 3.1", async () => {
    assert.equal(doc["openapi"], "3.1.0");
    assert.equal((doc["info"] as Obj)["version"], library.set.id);
    assert.equal(doc["servers"], undefined);
    await assertValid(doc);
  });

  it("has a path and method for every binding, additional bindings included, multi-segment variables expanded", () => {
    const listed = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path} ${(item[m] as Obj)["operationId"]}`));
    assert.deepEqual(listed.sort(), [
      "DELETE /v1/shelves/{shelf}/books/{book} Library_DeleteBook",
      "GET /v1/files/{path} Library_GetFile",
      "GET /v1/messages/{message} Messaging_GetMessage",
      "GET /v1/shelves/{shelf}/books Library_ListBooks",
      "GET /v1/shelves/{shelf}/books/{book} Library_GetBook",
      "GET /v1/shelves/{shelf}/books:watch Library_WatchBooks",
      "GET /v1/shelves/{shelf}/titles Library_ListTitles",
      "GET /v2/messages/{message_id} Messaging_GetMessageById",
      "GET /v5/messages/{message_id} Messaging_GetUserMessage",
      "GET /v5/users/{user_id}/messages/{message_id} Messaging_GetUserMessage_1",
      "PATCH /v1/shelves/{shelf}/books/{book} Library_UpdateBook",
      "PATCH /v3/messages/{message_id} Messaging_UpdateMessage",
      "PATCH /v4/messages/{message_id} Messaging_UpdateMessageFields",
      "POST /v1/shelves/{shelf}/books Library_CreateBook",
      "POST /v1/shelves/{shelf}/books/{book}:archive Library_ArchiveBook",
      "PUT /v1/shelves/{shelf}/books/{book} Library_ReplaceBook",
    ]);
    // Unannotated methods have no operation.
    assert.ok(!listed.some((l) => l.includes("Unannotated")));
  });

  it("lists the custom PURGE verb under x-custom-operations, not under paths", () => {
    const custom = doc["x-custom-operations"] as Obj[];
    assert.equal(custom.length, 1);
    assert.equal(custom[0]!["method"], "PURGE");
    assert.equal(custom[0]!["path"], "/v1/shelves/{shelf}/cache");
    assert.equal(custom[0]!["operation"]["operationId"], "Library_PurgeShelf");
    assert.equal(doc.paths["/v1/shelves/{shelf}/cache"], undefined);
  });

  it("describes path parameters: the segments of a resource name, a typed single field, a ** rest", () => {
    const get = op("get", "/v1/shelves/{shelf}/books/{book}");
    assert.deepEqual(
      (get["parameters"] as Obj[]).map((p) => [p["name"], p["in"], p["required"], p["x-field"]]),
      [
        ["shelf", "path", true, "name"],
        ["book", "path", true, "name"],
      ],
    );
    assert.deepEqual(param(get, "book")["schema"], { type: "string", pattern: "^[^/]+$" });
    assert.match(param(get, "shelf")["description"], /of name \(shelves\/\*\/books\/\*\)/);
    assert.equal(param(op("get", "/v1/files/{path}"), "path")["x-multi-segment"], true);
    assert.equal(param(op("patch", "/v1/shelves/{shelf}/books/{book}"), "book")["x-field"], "book.name");
  });

  it("describes query parameters for the fields the path and body leave: repeated, nested, enums, well-known types", () => {
    const list = op("get", "/v1/shelves/{shelf}/books");
    assert.deepEqual(param(list, "pageSize")["schema"], { type: "integer", format: "int32" });
    const tags = param(list, "tags");
    assert.deepEqual([tags["schema"], tags["style"], tags["explode"]], [{ type: "array", items: { type: "string" } }, "form", true]);
    assert.equal(tags["description"], "Only books with every one of these tags.");
    assert.deepEqual(param(list, "genre")["schema"], { $ref: "#/components/schemas/library.v1.Genre" });
    assert.deepEqual(schemas["library.v1.Genre"]["enum"], ["GENRE_UNSPECIFIED", "GENRE_FICTION", "GENRE_HISTORY", "GENRE_POETRY"]);
    assert.equal(param(list, "publishedAfter")["schema"]["format"], "date-time");
    assert.equal(param(list, "maxAge")["schema"]["type"], "string");
    assert.deepEqual(param(list, "minPages")["schema"]["type"], ["integer", "null"]);
    assert.deepEqual(param(list, "ids")["schema"], { type: "array", items: { type: "string", format: "int64", pattern: "^-?[0-9]+$" } });
    assert.equal(param(list, "cursor")["schema"]["contentEncoding"], "base64");
    assert.equal(param(list, "filter.pages.min")["x-field"], "filter.pages.min");
    // The path field is not also a query parameter; a GET with every field bound has none.
    assert.ok(!(list["parameters"] as Obj[]).some((p) => p["name"] === "parent"));
    assert.equal(param(op("get", "/v2/messages/{message_id}"), "sub.subfield")["in"], "query");
    assert.deepEqual(
      (op("get", "/v1/shelves/{shelf}/books/{book}")["parameters"] as Obj[]).filter((p) => p["in"] === "query"),
      [],
    );
  });

  it("describes request bodies: a body field, the whole message minus path fields, none for GET", () => {
    const create = op("post", "/v1/shelves/{shelf}/books");
    assert.deepEqual(create["requestBody"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/library.v1.Book");
    assert.deepEqual(param(create, "requestId")["in"], "query");
    const archive = op("post", "/v1/shelves/{shelf}/books/{book}:archive")["requestBody"]["content"]["application/json"]["schema"];
    assert.deepEqual(Object.keys(archive["properties"]), ["reason"]);
    assert.equal(op("get", "/v1/shelves/{shelf}/books/{book}")["requestBody"], undefined);
    // body "*": no query parameters at all.
    assert.deepEqual(
      (op("patch", "/v4/messages/{message_id}")["parameters"] as Obj[]).map((p) => p["in"]),
      ["path"],
    );
  });

  it("describes responses: the output message, a response_body field, NDJSON for a server stream, the error default", () => {
    const get = op("get", "/v1/shelves/{shelf}/books/{book}");
    assert.equal(get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/library.v1.Book");
    assert.deepEqual(get["responses"]["default"]["content"]["application/json"]["schema"], { $ref: "#/components/schemas/google.rpc.Status" });
    const titles = op("get", "/v1/shelves/{shelf}/titles")["responses"]["200"]["content"]["application/json"]["schema"];
    assert.deepEqual([titles["type"], titles["items"]], ["array", { type: "string" }]);
    const watch = op("get", "/v1/shelves/{shelf}/books:watch")["responses"]["200"]["content"]["application/x-ndjson"]["schema"];
    assert.deepEqual(watch["properties"]["result"], { $ref: "#/components/schemas/library.v1.Book" });
    assert.deepEqual(watch["properties"]["error"], { $ref: "#/components/schemas/google.rpc.Status" });
    assert.deepEqual(Object.keys(schemas["google.rpc.Status"]["properties"]), ["code", "message", "details"]);
  });

  it("carries the proto comments: summaries, descriptions, tags, field descriptions", () => {
    const get = op("get", "/v1/shelves/{shelf}/books/{book}");
    assert.equal(get["summary"], "Gets one book.");
    assert.deepEqual(get["tags"], ["library.v1.Library"]);
    const tag = (doc["tags"] as Obj[]).find((t) => t["name"] === "library.v1.Library")!;
    assert.match(tag["description"], /^Shelves of books, addressed by resource names\./);
    assert.match(schemas["library.v1.Book"]["description"], /^A book on a shelf\./);
    assert.match(schemas["library.v1.Book"]["properties"]["name"]["description"], /shelves\/\{shelf\}\/books\/\{book\}/);
    assert.match(schemas["library.v1.Message"]["properties"]["messageId"]["description"], /^Its id\./);
    assert.equal(schemas["library.v1.Message"]["properties"]["messageId"]["x-proto-name"], "message_id");
  });

  it("declares the x-api-key scheme and requires it globally (and neither when the gateway has no keys)", async () => {
    assert.deepEqual((doc["components"] as Obj)["securitySchemes"], { apiKey: { type: "apiKey", in: "header", name: "x-api-key" } });
    assert.deepEqual(doc["security"], [{ apiKey: [] }]);
    const open = documentOf("library", library, false);
    assert.equal(open["security"], undefined);
    await assertValid(open);
  });

  it("keeps operationIds unique and components apart when two backends share names", async () => {
    const both = buildOpenApiDocument({
      backends: [
        { service: "a", schema: library, bindings: annotatedBindings("a", library).bindings.map((b) => ({ ...b, prefix: "/a" })) },
        { service: "b", schema: library, bindings: annotatedBindings("b", library).bindings.map((b) => ({ ...b, prefix: "/b/" })) },
      ],
      unavailable: [{ service: "down", message: "connection refused" }],
      title: "two",
      apiKey: true,
    });
    await assertValid(both);
    assert.equal(both.paths["/a/v1/shelves/{shelf}/books/{book}"]?.["get"]?.["operationId" as never], "Library_GetBook");
    assert.equal(both.paths["/b/v1/shelves/{shelf}/books/{book}"]?.["get"]?.["operationId" as never], "Library_GetBook_2");
    assert.deepEqual(both["x-unavailable"], [{ service: "down", message: "connection refused" }]);
  });
});

describe("OpenAPI document of an API without annotations (shop)", () => {
  const shopDoc = documentOf("orders", shop);
  const s = (shopDoc["components"] as Obj)["schemas"] as Obj;

  it("validates, with empty paths and a schema for every message", async () => {
    await assertValid(shopDoc);
    assert.deepEqual(shopDoc.paths, {});
    for (const name of ["shop.v1.Order", "shop.v1.Item", "shop.v1.Item.Dimensions", "shop.v1.GetOrderRequest", "shop.v1.ListOrdersResponse", "shop.common.v1.Money", "shop.common.v1.Address", "shop.v1.Status", "shop.common.v1.Priority"]) {
      assert.ok(s[name], `${name} in ${Object.keys(s).join(", ")}`);
    }
  });

  it("gives every field kind its proto3 JSON form", () => {
    const p = s["shop.v1.Order"]["properties"] as Obj;
    assert.deepEqual(p["bigSigned"], { type: "string", format: "int64", pattern: "^-?[0-9]+$", "x-proto-name": "big_signed" });
    assert.equal(p["bigUnsigned"]["format"], "uint64");
    assert.equal(p["smallSigned"]["type"], "integer");
    assert.equal(p["payload"]["contentEncoding"], "base64");
    assert.deepEqual(p["status"]["$ref"], "#/components/schemas/shop.v1.Status");
    assert.deepEqual(p["counters"]["additionalProperties"], { type: "string", format: "int64", pattern: "^-?[0-9]+$" });
    assert.equal(p["itemsByLine"]["additionalProperties"]["$ref"], "#/components/schemas/shop.v1.Item");
    assert.equal(p["createdAt"]["format"], "date-time");
    assert.match(p["ttl"]["pattern"], /s\$$/);
    assert.equal(p["attributes"]["type"], "object");
    assert.equal(p["extra"]["type"], undefined); // any JSON value
    assert.equal(p["extraList"]["type"], "array");
    assert.deepEqual(p["wrappedInt64"]["type"], ["string", "null"]);
    assert.equal(p["updateMask"]["type"], "string");
    assert.equal(p["detail"]["$ref"], "#/components/schemas/google.protobuf.Any");
    assert.equal(p["nothing"]["additionalProperties"], false);
    assert.equal(p["title"]["x-proto-name"], "display_name"); // json_name honoured
    assert.deepEqual(s["shop.v1.Order"]["x-proto-oneofs"], { destination: ["shipTo", "pickupStore", "digital"] });
    assert.match(p["pickupStore"]["description"], /oneof destination/);
    assert.equal(s["shop.common.v1.Address"]["properties"]["zip"]["x-proto-name"], "postal_code");
  });
});

describe("console API view logic over the document", () => {
  const load = async (): Promise<any> => {
    const { join } = await import("node:path");
    const { pathToFileURL } = await import("node:url");
    const { consoleDir } = await import("../../src/console/index.js");
    return import(pathToFileURL(join(consoleDir(), "openapi.js")).href);
  };

  it("builds request URLs: path values percent-encoded, a ** value keeps its /, repeated query values", async () => {
    const { buildUrl } = await load();
    const get = op("get", "/v1/shelves/{shelf}/books/{book}");
    assert.equal(buildUrl("/v1/shelves/{shelf}/books/{book}", get["parameters"], { "path:shelf": "a b", "path:book": "x/y" }), "/v1/shelves/a%20b/books/x%2Fy");
    assert.throws(() => buildUrl("/v1/shelves/{shelf}/books/{book}", get["parameters"], { "path:shelf": "a" }), /path parameter book is required/);
    const file = op("get", "/v1/files/{path}");
    assert.equal(buildUrl("/v1/files/{path}", file["parameters"], { "path:path": "dir/a b.txt" }), "/v1/files/dir/a%20b.txt");
    const list = op("get", "/v1/shelves/{shelf}/books");
    assert.equal(
      buildUrl("/v1/shelves/{shelf}/books", list["parameters"], { "path:shelf": "s", "query:tags": "a, b", "query:pageSize": "5", "query:genre": "" }),
      "/v1/shelves/s/books?pageSize=5&tags=a&tags=b",
    );
  });

  it("prefills bodies with proto3 JSON zero values and ends recursion", async () => {
    const { skeletonOf, operationsOf } = await load();
    const body = op("patch", "/v4/messages/{message_id}")["requestBody"]["content"]["application/json"]["schema"];
    // body "*": the message minus message_id, which the path sets.
    assert.deepEqual(skeletonOf(body, doc), { text: "", name: "", userId: "", revision: "0", subfield: "" });
    const recursive = { components: { schemas: { N: { type: "object", properties: { next: { $ref: "#/components/schemas/N" }, d: { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" } } } } } };
    assert.deepEqual(skeletonOf({ $ref: "#/components/schemas/N" }, recursive), { next: {}, d: "0s" });
    const ops = operationsOf(doc) as Array<{ method: string; custom: boolean }>;
    assert.equal(ops.length, 17);
    assert.deepEqual(ops.filter((o) => o.custom).map((o) => o.method), ["PURGE"]);
  });
});
