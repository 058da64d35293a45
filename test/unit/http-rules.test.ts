import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create, createFileRegistry, fromBinary, setExtension, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { buildSchema } from "../../src/backends/schema.js";
import { httpRulesOf, parseTemplate } from "../../src/backends/http-rules.js";
import { fileDescriptorProtos, LIBRARY_PROTO } from "../support/protos/descriptors.js";

const SERVICES = ["library.v1.Messaging", "library.v1.Library"];

/** The library API's bindings as "Method: VERB template body>response" lines. */
function bindingLines(files: FileDescriptorProto[]): { lines: string[]; problems: string[] } {
  const schema = buildSchema(
    files.map((f) => toBinary(FileDescriptorProtoSchema, f)),
    SERVICES,
    "library",
  );
  const rules = httpRulesOf(schema.registry, schema.services);
  const lines: string[] = [];
  for (const [m, bindings] of rules.bindings) for (const b of bindings) lines.push(`${m.name}: ${b.httpMethod} ${b.template.text} ${b.body}>${b.responseBody}`);
  return { lines, problems: rules.problems.map((p) => `${p.method}: ${p.message}`) };
}

describe("google.api.http path templates", () => {
  it("parses literals, wildcards, nested field paths and the verb (google/api/http.proto's grammar)", () => {
    const t = parseTemplate("/v1/{book.name=shelves/*/books/*}:archive");
    assert.deepEqual(t.segments, [{ kind: "literal", value: "v1" }, { kind: "literal", value: "shelves" }, { kind: "*" }, { kind: "literal", value: "books" }, { kind: "*" }]);
    assert.deepEqual(t.variables, [{ fieldPath: ["book", "name"], start: 1, end: 5, multiSegment: true }]);
    assert.equal(t.verb, "archive");
    const single = parseTemplate("/v1/messages/{message_id}");
    assert.deepEqual(single.variables, [{ fieldPath: ["message_id"], start: 2, end: 3, multiSegment: false }]);
    assert.equal(single.verb, undefined);
    const deep = parseTemplate("/v1/files/{path=**}");
    assert.deepEqual(deep.segments.at(-1), { kind: "**" });
    assert.equal(deep.variables[0]!.multiSegment, true);
  });

  it("refuses malformed templates, naming the problem", () => {
    const cases: Array<[string, RegExp]> = [
      ["v1/items", /must start with \//],
      ["/v1//items", /empty segment/],
      ["/v1/items/", /ends with \//],
      ["/v1/{name", /unclosed \{/],
      ["/v1/{a={b}}", /nests a variable/],
      ["/v1/{1bad}", /invalid field path/],
      ["/v1/{a}/{a}", /binds a twice/],
      ["/v1/**/items", /\*\* before its last segment/],
      ["/v1/it ems", /invalid segment/],
      ["/v1/items:b a d", /invalid verb/],
    ];
    for (const [text, re] of cases) assert.throws(() => parseTemplate(text), re, text);
  });
});

describe("google.api.http rules read through reflection", () => {
  it("reads every binding of the library API, additional bindings, custom kinds, body and response_body included", () => {
    const { lines, problems } = bindingLines(fileDescriptorProtos(LIBRARY_PROTO));
    assert.deepEqual(problems, []);
    assert.ok(lines.includes("GetMessage: GET /v1/{name=messages/*} >"));
    assert.ok(lines.includes("UpdateMessage: PATCH /v3/messages/{message_id} message>"));
    assert.ok(lines.includes("UpdateMessageFields: PATCH /v4/messages/{message_id} *>"));
    assert.ok(lines.includes("GetUserMessage: GET /v5/messages/{message_id} >"));
    assert.ok(lines.includes("GetUserMessage: GET /v5/users/{user_id}/messages/{message_id} >"));
    assert.ok(lines.includes("ListTitles: GET /v1/{parent=shelves/*}/titles >titles"));
    assert.ok(lines.includes("PurgeShelf: PURGE /v1/{name=shelves/*}/cache >"));
    assert.ok(!lines.some((l) => l.startsWith("Unannotated:")), "a method without an annotation has no binding");
    assert.equal(lines.length, 17);
  });

  it("leaves out a rule whose fields do not fit its messages and reports why", () => {
    const files = fileDescriptorProtos(LIBRARY_PROTO).map((f) => fromBinary(FileDescriptorProtoSchema, toBinary(FileDescriptorProtoSchema, f)));
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: files }));
    const ext = registry.getExtension("google.api.http")!;
    const rule = registry.getMessage("google.api.HttpRule")!;
    const library = files.find((f) => f.name === LIBRARY_PROTO)!;
    const method = (name: string) => library.service.find((s) => s.name === "Library")!.method.find((m) => m.name === name)!;
    setExtension(method("GetBook").options!, ext, create(rule, { pattern: { case: "get", value: "/v1/{title=books/*}" } }) as never);
    setExtension(method("CreateBook").options!, ext, create(rule, { pattern: { case: "post", value: "/v1/books" }, body: "volume" }) as never);
    setExtension(method("ListTitles").options!, ext, create(rule, { pattern: { case: "get", value: "/v1/{tags}" } }) as never);
    setExtension(method("ListBooks").options!, ext, create(rule, { pattern: { case: "get", value: "/v1/{tags}" } }) as never);
    const { lines, problems } = bindingLines(files);
    assert.ok(!lines.some((l) => /^(GetBook|CreateBook|ListTitles|ListBooks):/.test(l)));
    assert.ok(problems.some((p) => /GetBook: .*path variable title is not a field of library\.v1\.GetBookRequest/.test(p)), problems.join("\n"));
    assert.ok(problems.some((p) => /CreateBook: .*body volume is not a field/.test(p)), problems.join("\n"));
    assert.ok(problems.some((p) => /ListTitles: .*path variable tags is not a field/.test(p)), problems.join("\n"));
    assert.ok(problems.some((p) => /ListBooks: .*path variable tags is a repeated or map field/.test(p)), problems.join("\n"));
  });
});
