/**
 * Differential cases for the google.api.http transcoding: each request and what it must give (HTTP status, the gRPC
 * request the backend decodes, the JSON answered) is taken from the field's own documentation and from grpc-gateway's
 * runtime, not from this gateway's code. Every case names its source. The API is test/support/protos/library/v1/
 * library.proto: `Messaging` carries google/api/http.proto's examples one version per example (v1..v5), `Library`
 * the resource-style shapes.
 *
 * Where the references disagree the gateway follows grpc-gateway v2 (its current docs and runtime: query.go,
 * mux.go, errors.go, handler.go at github.com/grpc-ecosystem/grpc-gateway), and the case says what Envoy's
 * gRPC-JSON transcoder or grpc-gateway 1.x does instead. A few cases assert the gateway's own documented choice
 * where it differs from grpc-gateway on purpose (docs/transcoding.md "Differences from grpc-gateway and Envoy"):
 * each keeps its source, and its comment says what grpc-gateway does and why the gateway differs. Response JSON is compared as proto3 JSON (parsed into the
 * response message and compared as messages, so `"0"` and an omitted zero are equal); the one case on the exact
 * printed form says so.
 *
 * Sources, abbreviated in the table:
 *   HTTP_PROTO  googleapis google/api/http.proto (node_modules/google-proto-files/google/api/http.proto), its comments
 *   GW_QUERY    grpc-gateway runtime/query.go (PopulateQueryParameters, parseField, parseMessage) and query_test.go
 *   GW_MUX      grpc-gateway runtime/mux.go (ServeMux.ServeHTTP) and runtime/pattern.go (Pattern.MatchAndEscape)
 *   GW_ERRORS   grpc-gateway runtime/errors.go (HTTPStatusFromCode, DefaultHTTPErrorHandler, DefaultRoutingErrorHandler)
 *   GW_STREAM   grpc-gateway runtime/handler.go (ForwardResponseStream, handleForwardResponseStreamError, errorChunk)
 *   GW_MARSHAL  grpc-gateway runtime/marshaler_registry.go (defaultMarshaler: protojson, EmitUnpopulated, DiscardUnknown)
 *   GW_PATCH    https://grpc-ecosystem.github.io/grpc-gateway/docs/mapping/patch_feature
 *   GW_CUSTOM   https://grpc-ecosystem.github.io/grpc-gateway/docs/mapping/customizing_your_gateway
 *   ENVOY       https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/grpc_json_transcoder_filter
 *               and its v3 API (GrpcJsonTranscoder: query_param_unescape_plus, ignore_unknown_query_parameters,
 *               url_unescape_spec)
 *   ENVOY_IT    envoyproxy/envoy test/extensions/filters/http/grpc_json_transcoder/grpc_json_transcoder_integration_test.cc
 *               (the bookstore requests and their expected gRPC requests and JSON)
 *   AIP_193     https://google.aip.dev/193 (Google's JSON error shape)
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { create, createFileRegistry, equals, fromJson, toJson, type DescMessage, type FileRegistry, type JsonValue } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceConfig } from "../../src/config/services.js";
import { startLibraryBackend, type LibraryBackend } from "../support/backends/library-backend.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { until } from "../support/transcode.js";
import { startBookstoreBackend, type BookstoreBackend } from "../support/backends/bookstore-backend.js";
import { BOOKSTORE_PROTO, fileDescriptorProtos, LIBRARY_PROTO } from "../support/protos/descriptors.js";

/** The two test APIs: library/v1 (google/api/http.proto's examples, resource shapes) and bookstore/v1 (Envoy's). */
type Api = "library" | "bookstore";
const registries: Record<Api, FileRegistry> = {
  library: createFileRegistry(create(FileDescriptorSetSchema, { file: fileDescriptorProtos(LIBRARY_PROTO) })),
  bookstore: createFileRegistry(create(FileDescriptorSetSchema, { file: fileDescriptorProtos(BOOKSTORE_PROTO) })),
};
const schema = (api: Api, name: string): DescMessage => {
  const m = registries[api].getMessage(name);
  if (!m) throw new Error(`no message ${name} in ${api}`);
  return m;
};
/** proto3 JSON as the backends record it (original field names, defaults omitted), for comparing requests. */
const asRecorded = (api: Api, type: string, json: JsonValue): JsonValue => {
  const registry = registries[api];
  return toJson(schema(api, type), fromJson(schema(api, type), json, { registry }), { useProtoFieldName: true, registry });
};

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request on its own connection; any method name (PURGE too); 10 s bound. */
function request(base: string, method: string, path: string, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, agent: false, headers: body === undefined ? {} : { "content-type": "application/json" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end(body);
  });
}

/** One documented request and what it must give. */
interface Case {
  name: string;
  /** The API it calls; default library. */
  api?: Api;
  /** Where the expectation comes from (abbreviations in the header comment) and the example's wording. */
  source: string;
  method: string;
  path: string;
  /** Request body text (JSON unless the case is about a bad body). */
  body?: string;
  status: number;
  /** The gRPC request the backend must decode: short method name, request message type and its proto3 JSON. */
  grpc?: { method: string; type: string; request: JsonValue };
  /** The backend must not be called (the request is refused or unrouted before it). */
  noCall?: true;
  /** The JSON answered, compared as a message of `type` (or as plain JSON when `type` is absent). */
  response?: { type?: string; json: JsonValue };
  /** The grpc-gateway error body `{code, message, details}`: its gRPC code, and its message when given. */
  error?: { code: number; message?: string };
  /** Response headers that must have these values. */
  headers?: Record<string, string>;
  /** NDJSON stream lines, each compared as below: `result` as a message of `type`, `error` as an error body. */
  stream?: { type: string; lines: Array<{ result: JsonValue } | { error: { code: number; message?: string } }> };
}

const GRPC_CODES: Array<[string, number, number]> = [
  // [code name, number, HTTP status] per GW_ERRORS HTTPStatusFromCode (google/rpc/code.proto's table; 499 for CANCELLED).
  ["CANCELLED", 1, 499],
  ["UNKNOWN", 2, 500],
  ["INVALID_ARGUMENT", 3, 400],
  ["DEADLINE_EXCEEDED", 4, 504],
  ["NOT_FOUND", 5, 404],
  ["ALREADY_EXISTS", 6, 409],
  ["PERMISSION_DENIED", 7, 403],
  ["RESOURCE_EXHAUSTED", 8, 429],
  // "Note, this deliberately doesn't translate to the similarly named '412 Precondition Failed' HTTP response status."
  ["FAILED_PRECONDITION", 9, 400],
  ["ABORTED", 10, 409],
  ["OUT_OF_RANGE", 11, 400],
  ["UNIMPLEMENTED", 12, 501],
  ["INTERNAL", 13, 500],
  ["UNAVAILABLE", 14, 503],
  ["DATA_LOSS", 15, 500],
  ["UNAUTHENTICATED", 16, 401],
];

const LIST = "library.v1.ListBooksRequest";
const BOOK = "library.v1.Book";
const MESSAGE = "library.v1.Message";

/** The cases, in order: later ones rely on the books earlier ones create. */
const CASES: Case[] = [
  // --- google/api/http.proto's own examples (Messaging v1..v5) ---
  {
    name: "path variable with a segment pattern",
    source: 'HTTP_PROTO: "HTTP: `GET /v1/messages/123456` - gRPC: `GetMessage(name: \\"messages/123456\\")`" (get: "/v1/{name=messages/*}")',
    method: "GET",
    path: "/v1/messages/123456",
    status: 200,
    grpc: { method: "GetMessage", type: "library.v1.GetMessageRequest", request: { name: "messages/123456" } },
    response: { type: MESSAGE, json: { name: "messages/123456", message_id: "123456", text: "message messages/123456" } },
  },
  {
    name: "unbound fields from the query string, nested sub.subfield",
    source: 'HTTP_PROTO: "HTTP: `GET /v1/messages/123456?revision=2&sub.subfield=foo` - gRPC: `GetMessage(message_id: \\"123456\\" revision: 2 sub: SubMessage(subfield: \\"foo\\"))`"',
    method: "GET",
    path: "/v2/messages/123456?revision=2&sub.subfield=foo",
    status: 200,
    grpc: { method: "GetMessageById", type: "library.v1.GetMessageByIdRequest", request: { message_id: "123456", revision: "2", sub: { subfield: "foo" } } },
    response: { type: MESSAGE, json: { message_id: "123456", revision: "2", subfield: "foo" } },
  },
  {
    name: "body mapped to one field",
    source: 'HTTP_PROTO: "HTTP: `PATCH /v1/messages/123456 { \\"text\\": \\"Hi!\\" }` - gRPC: `UpdateMessage(message_id: \\"123456\\" message { text: \\"Hi!\\" })`"',
    method: "PATCH",
    path: "/v3/messages/123456",
    body: '{ "text": "Hi!" }',
    status: 200,
    grpc: { method: "UpdateMessage", type: "library.v1.UpdateMessageRequest", request: { message_id: "123456", message: { text: "Hi!" } } },
    response: { type: MESSAGE, json: { message_id: "123456", text: "Hi!" } },
  },
  {
    name: 'body "*": every unbound field from the body',
    source: 'HTTP_PROTO: "HTTP: `PATCH /v1/messages/123456 { \\"text\\": \\"Hi!\\" }` - gRPC: `UpdateMessage(message_id: \\"123456\\" text: \\"Hi!\\")`"',
    method: "PATCH",
    path: "/v4/messages/123456",
    body: '{ "text": "Hi!" }',
    status: 200,
    grpc: { method: "UpdateMessageFields", type: MESSAGE, request: { message_id: "123456", text: "Hi!" } },
    response: { type: MESSAGE, json: { message_id: "123456", text: "Hi!" } },
  },
  {
    name: 'body "*": the path variable wins over the same field in the body',
    source: "HTTP_PROTO rule 1 (fields referred by the path template are passed via the URL path); GW generated handlers decode the body, then set path parameters over it",
    method: "PATCH",
    path: "/v4/messages/123456",
    body: '{ "message_id": "other", "text": "Hi!" }',
    status: 200,
    grpc: { method: "UpdateMessageFields", type: MESSAGE, request: { message_id: "123456", text: "Hi!" } },
  },
  {
    name: 'body "*": no query parameters, so one is refused',
    // The gateway's choice: grpc-gateway's generated handlers do not read the query for body "*" and drop it; the
    // gateway answers 400 naming the parameter, since a dropped parameter reads as a different request. Envoy does not
    // transcode a request with a parameter it cannot bind either (ENVOY: ignore_unknown_query_parameters, "Defaults
    // to false").
    source: 'HTTP_PROTO rule 2: "If HttpRule.body is \\"*\\", there is no URL query parameter, all fields are passed via URL path and HTTP request body"',
    method: "PATCH",
    path: "/v4/messages/123456?text=fromquery&revision=9",
    body: '{ "text": "Hi!" }',
    status: 400,
    noCall: true,
    error: { code: 3, message: 'query parameter text sets nothing: the request body is the whole message (the rule\'s body is "*")' },
  },
  {
    name: "body field names in lowerCamelCase are accepted",
    source: "GW_MARSHAL: the body is read with protojson.Unmarshal, which takes the JSON name and the proto name (proto3 JSON mapping)",
    method: "PATCH",
    path: "/v4/messages/123456",
    body: '{ "userId": "u1", "text": "Hi!" }',
    status: 200,
    grpc: { method: "UpdateMessageFields", type: MESSAGE, request: { message_id: "123456", user_id: "u1", text: "Hi!" } },
  },
  {
    name: "an unknown body field is refused, naming it",
    // The gateway's choice: grpc-gateway v2 discards an unknown body field (below), and Envoy's transcoder drops it as
    // well; the gateway answers 400 naming the field, as POST /v1/gateway/invoke-json does, so a misspelt field is
    // not silently lost.
    source: "GW_MARSHAL: defaultMarshaler UnmarshalOptions{DiscardUnknown: true}",
    method: "PATCH",
    path: "/v4/messages/123456",
    body: '{ "text": "Hi!", "no_such_field": 1 }',
    status: 400,
    noCall: true,
    error: { code: 3, message: 'field "no_such_field" is not a field of library.v1.Message' },
  },
  {
    name: "a body that is not JSON is INVALID_ARGUMENT",
    source: 'GW generated handlers: a body decode error returns status.Errorf(codes.InvalidArgument, "%v", err); GW_ERRORS maps it to 400',
    method: "PATCH",
    path: "/v4/messages/123456",
    body: "{ not json",
    status: 400,
    noCall: true,
    error: { code: 3 },
  },
  {
    name: "additional_bindings: the primary binding",
    source: 'HTTP_PROTO: "HTTP: `GET /v1/messages/123456` - gRPC: `GetMessage(message_id: \\"123456\\")`"',
    method: "GET",
    path: "/v5/messages/123456",
    status: 200,
    grpc: { method: "GetUserMessage", type: "library.v1.GetUserMessageRequest", request: { message_id: "123456" } },
    response: { type: MESSAGE, json: { message_id: "123456" } },
  },
  {
    name: "additional_bindings: the additional binding",
    source: 'HTTP_PROTO: "HTTP: `GET /v1/users/me/messages/123456` - gRPC: `GetMessage(user_id: \\"me\\" message_id: \\"123456\\")`"',
    method: "GET",
    path: "/v5/users/me/messages/123456",
    status: 200,
    grpc: { method: "GetUserMessage", type: "library.v1.GetUserMessageRequest", request: { user_id: "me", message_id: "123456" } },
    response: { type: MESSAGE, json: { message_id: "123456", user_id: "me" } },
  },
  {
    name: "the printed response: lowerCamelCase names, unpopulated fields omitted",
    // The gateway's choice: grpc-gateway v2 prints unpopulated fields (EmitUnpopulated: true, below); the gateway
    // omits them, as proto3 JSON does by default, as Envoy does by default (ENVOY PrintOptions
    // always_print_primitive_fields: "Defaults to false") and as every other gateway route answers.
    source: "GW_MARSHAL: defaultMarshaler is protojson with MarshalOptions{EmitUnpopulated: true} (UseProtoNames false)",
    method: "GET",
    path: "/v5/messages/7",
    status: 200,
    response: { json: { messageId: "7" } },
  },

  // --- path matching and decoding ---
  {
    name: "single-segment variable: percent-decoded",
    source: 'HTTP_PROTO: "If a variable contains exactly one path segment ... all characters except [-_.~0-9a-zA-Z] are percent-encoded. The server side does the reverse decoding."',
    method: "GET",
    path: "/v2/messages/hello%20w%C3%B6rld",
    status: 200,
    grpc: { method: "GetMessageById", type: "library.v1.GetMessageByIdRequest", request: { message_id: "hello wörld" } },
  },
  {
    name: "multi-segment variable: %2F stays encoded",
    source: 'HTTP_PROTO: "If a variable contains multiple path segments, such as {var=foo/*} or {var=**} ... The server side does the reverse decoding, except \\"%2F\\" and \\"%2f\\" are left unchanged."',
    // grpc-gateway v2's default UnescapingModeLegacy decodes the whole path first (%2F would split a segment);
    // its UnescapingModeAllExceptReserved and Envoy's default url_unescape_spec keep %2F as here.
    method: "GET",
    path: "/v1/files/a%2Fb/c%20d.txt",
    status: 200,
    grpc: { method: "GetFile", type: "library.v1.GetFileRequest", request: { path: "a%2Fb/c d.txt" } },
  },
  {
    name: "** matches several segments",
    source: 'HTTP_PROTO: "The syntax `**` matches zero or more URL path segments, which must be the last part of the URL path except the Verb."',
    method: "GET",
    path: "/v1/files/docs/2024/report.txt",
    status: 200,
    grpc: { method: "GetFile", type: "library.v1.GetFileRequest", request: { path: "docs/2024/report.txt" } },
    response: { type: "library.v1.File", json: { path: "docs/2024/report.txt", size: "20" } },
  },
  {
    name: "** matches zero segments",
    source: 'HTTP_PROTO: "`**` matches zero or more URL path segments"; GW_MUX pattern.go OpPushM joins components[pos:end], empty when none',
    method: "GET",
    path: "/v1/files",
    status: 200,
    grpc: { method: "GetFile", type: "library.v1.GetFileRequest", request: {} },
  },
  {
    name: "unknown path: 404 with the error body",
    source: 'GW_MUX: no handler matches any method -> routingErrorHandler(404); GW_ERRORS DefaultRoutingErrorHandler: NotFound -> codes.NotFound, message "Not Found"',
    method: "GET",
    path: "/v1/no/such/route",
    status: 404,
    noCall: true,
    error: { code: 5 },
  },
  {
    name: "known path, wrong method: 405 with Allow",
    // The gateway's choice: grpc-gateway v2 turns the 405 into UNIMPLEMENTED and answers 501; the gateway answers 405
    // with Allow (HTTP semantics, as grpc-gateway 1.x and every other gateway route do), the body still
    // {code: 12 (UNIMPLEMENTED), message, details}.
    source: 'GW_MUX: a handler of another method matches -> routingErrorHandler(405); GW_ERRORS DefaultRoutingErrorHandler: MethodNotAllowed -> codes.Unimplemented ("Method Not Allowed"), HTTPStatusFromCode -> 501',
    method: "DELETE",
    path: "/v1/shelves/s1/books",
    status: 405,
    noCall: true,
    headers: { allow: "GET, POST" },
    error: { code: 12, message: "method DELETE is not allowed on /v1/shelves/s1/books; allowed: GET, POST" },
  },

  // --- Library: create, read, the verbs ---
  {
    name: 'POST with body "book" and the rest from the query (request_id), answered 200',
    source: 'HTTP_PROTO rule 1: "All other fields are passed via the URL query parameters"; GW_QUERY populates the remaining fields for a body field rule; grpc-gateway answers every success 200 (ForwardResponseMessage)',
    method: "POST",
    path: "/v1/shelves/s1/books?request_id=b1",
    body: '{ "title": "Dune", "author": "Herbert", "genre": "GENRE_FICTION", "pages": 412, "tags": ["sf"] }',
    status: 200,
    grpc: { method: "CreateBook", type: "library.v1.CreateBookRequest", request: { parent: "shelves/s1", request_id: "b1", book: { title: "Dune", author: "Herbert", genre: "GENRE_FICTION", pages: 412, tags: ["sf"] } } },
    response: { type: BOOK, json: { name: "shelves/s1/books/b1", title: "Dune", author: "Herbert", genre: "GENRE_FICTION", pages: 412, tags: ["sf"] } },
  },
  {
    name: "GET by resource name",
    source: "HTTP_PROTO: path template {name=shelves/*/books/*} (the Library shape of the {name=messages/*} example)",
    method: "GET",
    path: "/v1/shelves/s1/books/b1",
    status: 200,
    grpc: { method: "GetBook", type: "library.v1.GetBookRequest", request: { name: "shelves/s1/books/b1" } },
    response: { type: BOOK, json: { name: "shelves/s1/books/b1", title: "Dune", author: "Herbert", genre: "GENRE_FICTION", pages: 412, tags: ["sf"] } },
  },
  {
    name: "trailing slash: the empty last segment matches *",
    source: "GW_MUX: the path is split on '/', and pattern.go OpPush takes any component, the empty one too (so GetBook gets name \"shelves/s1/books/\" and answers NOT_FOUND)",
    method: "GET",
    path: "/v1/shelves/s1/books/",
    status: 404,
    grpc: { method: "GetBook", type: "library.v1.GetBookRequest", request: { name: "shelves/s1/books/" } },
    error: { code: 5, message: "book shelves/s1/books/ not found" },
  },
  {
    name: "custom method verb (:archive) with body \"*\"",
    source: 'HTTP_PROTO: Verb = ":" LITERAL; GW_MUX: "explicitly look for a suffix in the last component that matches a colon plus the verb"',
    method: "POST",
    path: "/v1/shelves/s1/books/b1:archive",
    body: '{ "reason": "old" }',
    status: 200,
    grpc: { method: "ArchiveBook", type: "library.v1.ArchiveBookRequest", request: { name: "shelves/s1/books/b1", reason: "old" } },
    response: { type: BOOK, json: { name: "shelves/s1/books/b1", title: "Dune", author: "Herbert", genre: "GENRE_FICTION", pages: 412, tags: ["sf"], archived: true } },
  },
  {
    name: "response_body: the answer is the named field",
    source: 'HTTP_PROTO HttpRule.response_body: "The name of the response field whose value is mapped to the HTTP response body."',
    method: "GET",
    path: "/v1/shelves/s1/titles",
    status: 200,
    grpc: { method: "ListTitles", type: "library.v1.ListTitlesRequest", request: { parent: "shelves/s1" } },
    response: { json: ["Dune"] },
  },
  {
    name: "server streaming: one {\"result\": ...} line per message",
    source: 'GW_STREAM ForwardResponseStream: each message marshaled as {"result": msg} followed by the "\\n" delimiter',
    method: "GET",
    path: "/v1/shelves/s1/books:watch",
    status: 200,
    grpc: { method: "WatchBooks", type: LIST, request: { parent: "shelves/s1" } },
    stream: { type: BOOK, lines: [{ result: { name: "shelves/s1/books/b1", title: "Dune", author: "Herbert", genre: "GENRE_FICTION", pages: 412, tags: ["sf"], archived: true } }] },
  },
  {
    name: "PATCH with a hidden FieldMask: update_mask filled from the body's fields",
    source: 'GW_PATCH: "If a binding is mapped to patch and the request message has exactly one FieldMask message in it ... the FieldMask is updated from the request body and set in the gRPC request message."',
    method: "PATCH",
    path: "/v1/shelves/s1/books/b1",
    body: '{ "title": "Dune Messiah" }',
    status: 200,
    grpc: { method: "UpdateBook", type: "library.v1.UpdateBookRequest", request: { book: { name: "shelves/s1/books/b1", title: "Dune Messiah" }, update_mask: "title" } },
    response: { type: BOOK, json: { name: "shelves/s1/books/b1", title: "Dune Messiah", author: "Herbert", genre: "GENRE_FICTION", pages: 412, tags: ["sf"], archived: true } },
  },
  {
    name: "PATCH with the FieldMask in the query: left as given",
    source: 'GW_PATCH: "The FieldMask is exposed to the REST request ... For this case, the field mask is left untouched by the gateway."',
    method: "PATCH",
    path: "/v1/shelves/s1/books/b1?update_mask=author",
    body: '{ "title": "Dune Messiah", "author": "F. Herbert" }',
    status: 200,
    grpc: { method: "UpdateBook", type: "library.v1.UpdateBookRequest", request: { book: { name: "shelves/s1/books/b1", title: "Dune Messiah", author: "F. Herbert" }, update_mask: "author" } },
  },
  {
    name: "PUT: no FieldMask from the body",
    source: 'GW_PATCH: "FieldMask is treated as a regular field by the gateway if the request method is not PATCH"',
    method: "PUT",
    path: "/v1/shelves/s1/books/b1",
    body: '{ "title": "Dune", "author": "Frank Herbert" }',
    status: 200,
    grpc: { method: "ReplaceBook", type: "library.v1.UpdateBookRequest", request: { book: { name: "shelves/s1/books/b1", title: "Dune", author: "Frank Herbert" } } },
  },

  // --- query parameters ---
  ...(
    [
      // [what, query, the fields it sets, the source's wording]
      ["scalars (int32, string)", "page_size=10&page_token=t", { page_size: 10, page_token: "t" }, 'HTTP_PROTO rule 1: "All other fields are passed via the URL query parameters, and the parameter name is the field path in the request message"'],
      ["a repeated field, repeated", "tags=a&tags=b", { tags: ["a", "b"] }, 'HTTP_PROTO: "A repeated field can be represented as multiple query parameters under the same name"; "...?param=A&param=B"'],
      ["repeated int64", "ids=1&ids=2", { ids: ["1", "2"] }, "GW_QUERY populateRepeatedField (query_test.go repeated_value {\"a\", \"b\", \"c\"})"],
      ["nested message fields", "filter.author=Ann&filter.pages.min=10&filter.pages.max=500", { filter: { author: "Ann", pages: { min: 10, max: 500 } } }, 'HTTP_PROTO: "each field of the message is mapped to a separate parameter, such as ...?foo.a=A&foo.b=B&foo.c=C"'],
      ["an enum by name", "genre=GENRE_HISTORY", { genre: "GENRE_HISTORY" }, 'GW_QUERY parseField: "Look for enum by name"'],
      ["a Timestamp (RFC 3339)", "published_after=2016-12-15T12:23:32Z", { published_after: "2016-12-15T12:23:32Z" }, "GW_QUERY parseMessage: google.protobuf.Timestamp by time.Parse(time.RFC3339Nano) (query_test.go timeStr)"],
      ["a Duration in Go's form", "max_age=13h", { max_age: "46800s" }, "GW_QUERY parseMessage: google.protobuf.Duration by time.ParseDuration (query_test.go durationStr = (13 * time.Hour).String() = \"13h0m0s\")"],
      ["a FieldMask", "read_mask=title,author", { read_mask: "title,author" }, "GW_QUERY parseMessage: google.protobuf.FieldMask, the value split on ',' (query_test.go fieldmaskStr \"float_value,double_value\")"],
      ["a wrapper", "min_pages=100", { min_pages: 100 }, "GW_QUERY parseMessage: google.protobuf.Int32Value by strconv.ParseInt (query_test.go wrapper_int32_value)"],
      ["bool and double", "include_archived=true&min_rating=4.5", { include_archived: true, min_rating: 4.5 }, "GW_QUERY parseField: strconv.ParseBool, strconv.ParseFloat (query_test.go bool_value, double_value)"],
      ["bytes in URL-safe base64", "cursor=YWJjMTIzIT8kKiYoKSctPUB-", { cursor: "YWJjMTIzIT8kKiYoKSctPUB+" }, 'GW_QUERY: bytes by runtime.Bytes, standard base64 then URL-safe (query_test.go bytes_value "YWJjMTIzIT8kKiYoKSctPUB-")'],
      ["bytes in standard base64, '+' percent-encoded", "cursor=YWJjMTIzIT8kKiYoKSctPUB%2B", { cursor: "YWJjMTIzIT8kKiYoKSctPUB+" }, "GW_QUERY: bytes by runtime.Bytes (base64.StdEncoding first)"],
    ] as Array<[string, string, Record<string, JsonValue>, string]>
  ).map(
    ([what, query, fields, source]): Case => ({
      name: `query: ${what}`,
      source,
      method: "GET",
      path: `/v1/shelves/s1/books?${query}`,
      status: 200,
      grpc: { method: "ListBooks", type: LIST, request: { parent: "shelves/s1", ...fields } },
    }),
  ),
  {
    name: "query: enum by number",
    source: 'GW_QUERY parseField: "Look for enum by name", then strconv.Atoi and "Look for enum by number" (query_test.go: repeated_enum {"1", "2", "0"})',
    method: "GET",
    path: "/v1/shelves/s1/books?genre=3",
    status: 200,
    grpc: { method: "ListBooks", type: LIST, request: { parent: "shelves/s1", genre: "GENRE_POETRY" } },
  },
  {
    name: "query: enum number not in the enum is INVALID_ARGUMENT",
    source: 'GW_QUERY parseField: ByNumber nil -> "%q is not a valid value"; the generated handler returns codes.InvalidArgument -> 400',
    method: "GET",
    path: "/v1/shelves/s1/books?genre=7",
    status: 400,
    noCall: true,
    error: { code: 3 },
  },
  {
    name: "query: lowerCamelCase parameter names",
    source: "GW_QUERY populateFieldValueFromPath: fields.ByName, else fields.ByJSONName",
    method: "GET",
    path: "/v1/shelves/s1/books?pageSize=5&includeArchived=true&filter.pages.min=3",
    status: 200,
    grpc: { method: "ListBooks", type: LIST, request: { parent: "shelves/s1", page_size: 5, include_archived: true, filter: { pages: { min: 3 } } } },
  },
  {
    name: "query: '+' is a space",
    // Envoy keeps '+' unless query_param_unescape_plus is set (default false); grpc-gateway reads the query with
    // Go's url.ParseQuery, which decodes '+' as a space.
    source: "GW generated handlers: req.ParseForm (net/url ParseQuery, application/x-www-form-urlencoded decoding)",
    method: "GET",
    path: "/v1/shelves/s1/books?filter.author=Ann+Lee%21",
    status: 200,
    grpc: { method: "ListBooks", type: LIST, request: { parent: "shelves/s1", filter: { author: "Ann Lee!" } } },
  },
  {
    name: "query: Duration in the proto3 JSON form",
    source: "GW_QUERY parseMessage: time.ParseDuration accepts \"1.5s\" (query_test.go durationStr)",
    method: "GET",
    path: "/v1/shelves/s1/books?max_age=1.5s",
    status: 200,
    grpc: { method: "ListBooks", type: LIST, request: { parent: "shelves/s1", max_age: "1.5s" } },
  },
  {
    name: "query: a parameter naming no field is refused, naming it",
    // The gateway's choice: grpc-gateway ignores it (below); the gateway answers 400 naming the parameter, since a
    // silently dropped typo (?pagesize=5) reads as a different request. Envoy's default refuses it too: "By default,
    // the transcoder filter will not transcode a request if there are any unknown/invalid query parameters"
    // (ENVOY ignored_query_parameters; ignore_unknown_query_parameters "Defaults to false").
    source: 'GW_QUERY populateFieldValueFromPath: "We\'re not returning an error here because this could just be an extra query parameter that isn\'t part of the request."',
    method: "GET",
    path: "/v1/shelves/s1/books?utm_source=mail&page_size=2",
    status: 400,
    noCall: true,
    error: { code: 3, message: "query parameter utm_source is not a field of library.v1.ListBooksRequest" },
  },
  {
    name: "query: a field bound by the path is refused in the query",
    // The gateway's choice: grpc-gateway skips the parameter (below) and the path's value is used; the gateway answers
    // 400 naming it, since a parameter that is silently not used reads as a different request.
    source: "GW generated handlers: PopulateQueryParameters with the rule's filter (the path's fields); query.go skips a parameter whose path the filter holds",
    method: "GET",
    path: "/v1/shelves/s1/books?parent=shelves/other",
    status: 400,
    noCall: true,
    error: { code: 3, message: "query parameter parent is set by the path" },
  },
  {
    name: "query: two values for a singular field is INVALID_ARGUMENT",
    source: 'GW_QUERY populateFieldValueFromPath: "too many values for field %q"',
    method: "GET",
    path: "/v1/shelves/s1/books?page_size=1&page_size=2",
    status: 400,
    noCall: true,
    error: { code: 3 },
  },
  {
    name: "query: a value that does not parse is INVALID_ARGUMENT",
    source: "GW_QUERY parseField: strconv.ParseInt error -> \"parsing field %q\"; codes.InvalidArgument -> 400",
    method: "GET",
    path: "/v1/shelves/s1/books?page_size=ten",
    status: 400,
    noCall: true,
    error: { code: 3 },
  },
  {
    name: "query: a path through a scalar is INVALID_ARGUMENT",
    source: 'GW_QUERY: "invalid path: %q is not a message" (query_test.go\'s failing cases, e.g. "string_value.nested")',
    method: "GET",
    path: "/v1/shelves/s1/books?page_token.nested=x",
    status: 400,
    noCall: true,
    error: { code: 3 },
  },

  // --- server streaming ---
  {
    name: "server streaming: an error before the first message sets the status, one {\"error\": ...} line",
    // Envoy answers a streamed response as one JSON array instead of lines.
    source: "GW_STREAM handleForwardResponseStreamError: !wroteHeader -> WriteHeader(HTTPStatusFromCode(code)); errorChunk {\"error\": status}",
    method: "GET",
    path: "/v1/shelves/fail-INTERNAL/books:watch",
    status: 500,
    grpc: { method: "WatchBooks", type: LIST, request: { parent: "shelves/fail-INTERNAL" } },
    stream: { type: BOOK, lines: [{ error: { code: 13, message: "failed as asked by shelves/fail-INTERNAL" } }] },
  },

  // --- the last Library call, then the status of every gRPC code ---
  {
    name: "DELETE answers Empty as {}",
    source: "HTTP_PROTO: delete maps to HTTP DELETE; google.protobuf.Empty's JSON is {}",
    method: "DELETE",
    path: "/v1/shelves/s1/books/b1",
    status: 200,
    grpc: { method: "DeleteBook", type: "library.v1.DeleteBookRequest", request: { name: "shelves/s1/books/b1" } },
    response: { json: {} },
  },
  ...GRPC_CODES.map(
    ([name, code, status]): Case => ({
      name: `gRPC ${name} is HTTP ${status} with {code, message, details}`,
      source: `GW_ERRORS HTTPStatusFromCode(codes.${name}) and DefaultHTTPErrorHandler (the Status message marshaled: code, message, details)`,
      method: "GET",
      path: `/v1/shelves/s1/books/fail-${name}`,
      status,
      grpc: { method: "GetBook", type: "library.v1.GetBookRequest", request: { name: `shelves/s1/books/fail-${name}` } },
      error: { code, message: `failed as asked by shelves/s1/books/fail-${name}` },
    }),
  ),
  {
    name: "UNAUTHENTICATED carries the message in WWW-Authenticate",
    source: 'GW_ERRORS DefaultHTTPErrorHandler: "if s.Code() == codes.Unauthenticated { w.Header().Set("WWW-Authenticate", s.Message()) }"',
    method: "GET",
    path: "/v1/shelves/s1/books/fail-UNAUTHENTICATED",
    status: 401,
    headers: { "www-authenticate": "failed as asked by shelves/s1/books/fail-UNAUTHENTICATED" },
    error: { code: 16 },
  },
];

const SHELF = "bookstore.v1.Shelf";
const BS_BOOK = "bookstore.v1.Book";

/**
 * Envoy's bookstore (test/support/protos/bookstore/v1/bookstore.proto): the requests of Envoy's transcoder
 * documentation and integration tests (ENVOY_IT: envoyproxy/envoy test/extensions/filters/http/grpc_json_transcoder/
 * grpc_json_transcoder_integration_test.cc), on a backend that numbers shelves and books from 1. In order.
 */
const BOOKSTORE_CASES: Case[] = [
  {
    api: "bookstore",
    name: "bookstore: POST /shelf with the shelf as body, int64 id printed as a string",
    source: 'ENVOY_IT UnaryPost: POST /shelf {"theme": "Children"} -> CreateShelfRequest `shelf { theme: "Children" }`, answered {"id":"20","theme":"Children"} (our backend numbers from 1)',
    method: "POST",
    path: "/shelf",
    body: '{"theme": "Children"}',
    status: 200,
    grpc: { method: "CreateShelf", type: "bookstore.v1.CreateShelfRequest", request: { shelf: { theme: "Children" } } },
    response: { type: SHELF, json: { id: "1", theme: "Children" } },
  },
  {
    api: "bookstore",
    name: "bookstore: GET with an Empty request",
    source: 'ENVOY_IT UnaryGet: GET /shelves -> ListShelves(Empty), answered {"shelves":[{"id":"20","theme":"Children"},{"id":"1","theme":"Foo"}]}',
    method: "GET",
    path: "/shelves",
    status: 200,
    grpc: { method: "ListShelves", type: "google.protobuf.Empty", request: {} },
    response: { type: "bookstore.v1.ListShelvesResponse", json: { shelves: [{ id: "1", theme: "Children" }] } },
  },
  {
    api: "bookstore",
    name: "bookstore: an int64 path variable",
    source: "ENVOY_IT (GET /shelves/{shelf} -> GetShelfRequest shelf: <n>); GW template.go: a path parameter is converted by its field's type (runtime.Int64)",
    method: "GET",
    path: "/shelves/1",
    status: 200,
    grpc: { method: "GetShelf", type: "bookstore.v1.GetShelfRequest", request: { shelf: "1" } },
    response: { type: SHELF, json: { id: "1", theme: "Children" } },
  },
  {
    api: "bookstore",
    name: "bookstore: a literal segment beside a variable one",
    // grpc-gateway v2 picks the last registered pattern that matches (ServeMux.Handle prepends), so with GetShelf
    // declared first both it and Envoy (literal before variable) route here; the gateway routes literals first whatever
    // the order.
    source: "GW_MUX ServeMux.Handle (`append([]handler{{pat: pat, h: h}}, s.handlers[meth]...)`, the later rule first); ENVOY's path matcher (literal segments before variables)",
    method: "GET",
    path: "/shelves/featured",
    status: 200,
    grpc: { method: "GetFeaturedShelf", type: "google.protobuf.Empty", request: {} },
    response: { type: SHELF, json: { id: "0", theme: "Featured" } },
  },
  {
    api: "bookstore",
    name: "bookstore: an int64 path variable that is not a number is INVALID_ARGUMENT",
    source: 'GW template.go: a path parameter that does not convert -> status.Errorf(codes.InvalidArgument, "type mismatch, parameter: %s, error: %v"); GW_ERRORS -> 400',
    method: "GET",
    path: "/shelves/abc",
    status: 400,
    noCall: true,
    error: { code: 3 },
  },
  {
    api: "bookstore",
    name: "bookstore: PUT with body \"book\", repeated field in the body",
    source: 'ENVOY_IT QueryParams 7\'s body: {"id":"999","author":"George R.R. Martin","title":"A Game of Thrones","quotes":[...]} -> shelf: 1 book { ... quotes ... }',
    method: "PUT",
    path: "/shelves/1/books",
    body: '{"author":"George R.R. Martin","title":"A Game of Thrones","quotes":["A girl has no name"]}',
    status: 200,
    grpc: { method: "CreateBook", type: "bookstore.v1.CreateBookRequest", request: { shelf: "1", book: { author: "George R.R. Martin", title: "A Game of Thrones", quotes: ["A girl has no name"] } } },
    response: { type: BS_BOOK, json: { id: "1", author: "George R.R. Martin", title: "A Game of Thrones", quotes: ["A girl has no name"] } },
  },
  {
    api: "bookstore",
    name: "bookstore: server streaming as NDJSON",
    // Envoy answers a server stream as one JSON array ("it returns an array of messages for stream response
    // parameters", ENVOY); grpc-gateway writes one {"result": ...} per line, which the gateway follows.
    source: "GW_STREAM ForwardResponseStream; ENVOY (JSON mapping section) for the array form",
    method: "GET",
    path: "/shelves/1/books",
    status: 200,
    grpc: { method: "ListBooks", type: "bookstore.v1.ListBooksRequest", request: { shelf: "1" } },
    stream: {
      type: BS_BOOK,
      lines: [{ result: { id: "1", author: "George R.R. Martin", title: "A Game of Thrones", quotes: ["A girl has no name"] } }],
    },
  },
  {
    api: "bookstore",
    name: "bookstore: a nested path variable {book.id} wins over the body's id",
    source: 'HTTP_PROTO: "FieldPath = IDENT { "." IDENT }" (the bookstore\'s patch: "/shelves/{shelf}/books/{book.id}" body: "book"); GW generated handlers decode the body, then PopulateFieldFromPath(book.id)',
    method: "PATCH",
    path: "/shelves/1/books/1",
    body: '{"id":"99","title":"A Clash of Kings"}',
    status: 200,
    grpc: { method: "UpdateBook", type: "bookstore.v1.UpdateBookRequest", request: { shelf: "1", book: { id: "1", title: "A Clash of Kings" } } },
    response: { type: BS_BOOK, json: { id: "1", author: "George R.R. Martin", title: "A Clash of Kings", quotes: ["A girl has no name"] } },
  },
  {
    api: "bookstore",
    name: "bookstore: DELETE with two int64 path variables",
    source: 'ENVOY bookstore example: delete: "/shelves/{shelf}/books/{book}" -> DeleteBookRequest shelf, book; Empty answered as {}',
    method: "DELETE",
    path: "/shelves/1/books/1",
    status: 200,
    grpc: { method: "DeleteBook", type: "bookstore.v1.DeleteBookRequest", request: { shelf: "1", book: "1" } },
    response: { json: {} },
  },
  {
    api: "bookstore",
    name: "bookstore: custom OPTIONS method (not a CORS preflight: no Origin)",
    source: 'ENVOY bookstore example: custom {kind: "OPTIONS" path: "/shelves/{shelf}"}; HTTP_PROTO CustomHttpPattern',
    method: "OPTIONS",
    path: "/shelves/1",
    status: 200,
    grpc: { method: "ShelfOptions", type: "bookstore.v1.GetShelfRequest", request: { shelf: "1" } },
    response: { json: {} },
  },
  {
    api: "bookstore",
    name: "bookstore: json_name in the printed response",
    source: 'ENVOY bookstore example (Author.last_name [json_name = "lname"]); GW_MARSHAL: protojson prints the json_name, lowerCamelCase otherwise, unpopulated fields too, enums by name',
    method: "GET",
    path: "/authors/7",
    status: 200,
    grpc: { method: "GetAuthor", type: "bookstore.v1.GetAuthorRequest", request: { author: "7" } },
    response: { json: { id: "7", gender: "GENDER_FEMALE", firstName: "Ursula", lname: "Le Guin" } },
  },
  {
    api: "bookstore",
    name: "bookstore: a query parameter under the body field is refused",
    // The gateway's choice: grpc-gateway v2 filters the body field out of the query and drops the parameter (below);
    // Envoy binds it (ENVOY_IT QueryParams 1: POST /shelf?shelf.theme=Children -> shelf { theme: "Children" }). The
    // gateway answers 400 naming it: the body sets the whole field, and a parameter silently not used reads as a
    // different request.
    source: "GW template.go QueryParamFilter: the body field's path and the path parameters are filtered out of the query (grpc-gateway v2)",
    method: "POST",
    path: "/shelf?shelf.theme=Poetry",
    status: 400,
    noCall: true,
    error: { code: 3, message: "query parameter shelf.theme is set by the request body" },
  },
  {
    api: "bookstore",
    name: "bookstore: PUT with body \"book\": a query parameter under the body field is refused",
    // The gateway's choice, as above: grpc-gateway drops book.title, Envoy binds it (ENVOY_IT QueryParams 3: the
    // book gets title "War and Peace"); the gateway answers 400 naming it.
    source: "GW template.go QueryParamFilter (the body field `book` is filtered out of the query); ENVOY_IT QueryParams 3's request: PUT /shelves/1/books?book.title=War%20and%20Peace {\"author\" : \"Leo Tolstoy\"}",
    method: "PUT",
    path: "/shelves/1/books?book.title=War%20and%20Peace",
    body: '{"author" : "Leo Tolstoy"}',
    status: 400,
    noCall: true,
    error: { code: 3, message: "query parameter book.title is set by the request body" },
  },
  {
    api: "bookstore",
    name: "bookstore: NOT_FOUND is 404 with the backend's message",
    source: "GW_ERRORS HTTPStatusFromCode(codes.NotFound) = 404, body {code: 5, message, details: []}",
    method: "GET",
    path: "/shelves/99",
    status: 404,
    grpc: { method: "GetShelf", type: "bookstore.v1.GetShelfRequest", request: { shelf: "99" } },
    error: { code: 5, message: "shelf 99 not found" },
  },
];

/** The grpc-gateway error body: exactly code, message and details (an array). */
function assertErrorBody(value: unknown, want: { code: number; message?: string }): void {
  assert.ok(value !== null && typeof value === "object" && !Array.isArray(value), `an error object, got ${JSON.stringify(value)}`);
  const body = value as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ["code", "details", "message"], `the keys of ${JSON.stringify(body)}`);
  assert.equal(body["code"], want.code);
  assert.equal(typeof body["message"], "string");
  if (want.message !== undefined) assert.equal(body["message"], want.message);
  assert.ok(Array.isArray(body["details"]));
}

/** `got` (parsed JSON) equals `want` as a message of `type`, or as plain JSON without one. */
function assertJson(api: Api, got: unknown, want: { type?: string; json: JsonValue }): void {
  if (want.type === undefined) return assert.deepEqual(got, want.json);
  const registry = registries[api];
  const desc = schema(api, want.type);
  const g = fromJson(desc, got as JsonValue, { registry });
  const w = fromJson(desc, want.json, { registry });
  assert.ok(equals(desc, g, w, { registry }), `got ${JSON.stringify(got)}, want ${JSON.stringify(toJson(desc, w, { registry }))}`);
}

/**
 * Resolve once every GET path answers 200: the routes exist once each backend's schema is loaded (when its channel
 * first comes up). Bounded to 15 s.
 */
async function routesServed(gw: TestGateway, paths: string[]): Promise<void> {
  const served = async (): Promise<boolean> => (await Promise.all(paths.map((p) => request(gw.http, "GET", p)))).every((r) => r.status === 200);
  await until(`the annotated routes ${paths.join(", ")}`, served, 15_000);
}

describe("transcoding against the documented examples (google/api/http.proto, grpc-gateway, Envoy)", () => {
  let backend: LibraryBackend;
  let bookstore: BookstoreBackend;
  let gw: TestGateway;

  before(async () => {
    backend = await startLibraryBackend();
    bookstore = await startBookstoreBackend();
    const services = [
      { name: "library", grpc: { host: "127.0.0.1", port: backend.port }, transcoding: {} },
      { name: "bookstore", grpc: { host: "127.0.0.1", port: bookstore.port }, transcoding: {} },
    ] as ServiceConfig[];
    gw = await startTestGateway({ services });
    await routesServed(gw, ["/v1/messages/ready", "/authors/1"]);
  });

  after(async () => {
    await gw?.close();
    backend?.close();
    bookstore?.close();
  });

  it("custom HTTP method (PURGE) the HTTP server cannot receive: refused, named in /health and the OpenAPI document", async () => {
    // The gateway's choice: HTTP_PROTO CustomHttpPattern ("The custom pattern is used for specifying an HTTP method
    // that is not included in the `pattern` field") lets a rule use any method, and grpc-gateway serves PURGE; the
    // gateway's HTTP server (uWebSockets.js) drops a request whose method it does not parse, so the rule is refused at
    // registration and said so where an operator and a client look (a request would only see its connection closed).
    const health = await request(gw.http, "GET", "/health");
    const entry = (JSON.parse(health.body) as { entries: Record<string, { status: string; description: string }> }).entries["transcoding"];
    assert.equal(entry?.status, "Degraded", health.body);
    assert.match(entry.description, /PURGE \/v1\/\{name=shelves\/\*\}\/cache \(library library\.v1\.Library\.PurgeShelf\) is refused: the HTTP server \(uWebSockets\.js\) receives only GET/);
    const doc = await request(gw.http, "GET", "/v1/grpc/library/openapi.json");
    assert.equal(doc.status, 200, doc.body);
    const problems = (JSON.parse(doc.body) as { "x-problems"?: Array<{ method: string; message: string }> })["x-problems"] ?? [];
    const purge = problems.find((p) => p.method === "library.v1.Library.PurgeShelf");
    assert.match(purge?.message ?? "", /^PURGE \/v1\/\{name=shelves\/\*\}\/cache is refused: the HTTP server \(uWebSockets\.js\) receives only GET/, doc.body.slice(0, 400));
    const paths = Object.keys((JSON.parse(doc.body) as { paths: Record<string, unknown> }).paths);
    assert.ok(!paths.some((p) => p.endsWith("/cache")), `no path for the refused rule in the document: ${paths.join(", ")}`);
    assert.ok(paths.length > 0, "the document has the served paths");
  });

  for (const c of [...CASES, ...BOOKSTORE_CASES]) {
    it(`${c.name} [${c.method} ${c.path.length > 60 ? c.path.slice(0, 60) + "..." : c.path}]`, async () => {
      const api = c.api ?? "library";
      const calls: Array<{ method: string; request: JsonValue }> = api === "library" ? backend.calls : bookstore.calls;
      const before = calls.length;
      const r = await request(gw.http, c.method, c.path, c.body);
      const where = `${c.method} ${c.path} (source: ${c.source}) answered ${r.status} ${r.body.slice(0, 400)}`;
      assert.equal(r.status, c.status, where);
      for (const [k, v] of Object.entries(c.headers ?? {})) assert.equal(r.headers[k], v, `header ${k}: ${where}`);
      const made = calls.slice(before);
      if (c.noCall) assert.deepEqual(made, [], `the backend must not be called: ${where}`);
      if (c.grpc) {
        assert.equal(made.length, 1, `one backend call: ${where}`);
        assert.equal(made[0]!.method, c.grpc.method, where);
        assert.deepEqual(made[0]!.request, asRecorded(api, c.grpc.type, c.grpc.request), where);
      }
      if (c.stream) {
        assert.ok(r.body.endsWith("\n"), `NDJSON lines end with a newline: ${where}`);
        const lines = r.body.split("\n").slice(0, -1).map((l) => JSON.parse(l) as Record<string, unknown>);
        assert.equal(lines.length, c.stream.lines.length, where);
        c.stream.lines.forEach((want, i) => {
          const got = lines[i]!;
          assert.deepEqual(Object.keys(got), Object.keys(want), where);
          if ("result" in want) assertJson(api, got["result"], { type: c.stream!.type, json: want.result });
          else assertErrorBody(got["error"], want.error);
        });
        return;
      }
      if (c.response || c.error) assert.match(String(r.headers["content-type"]), /^application\/json\b/, where);
      const body: unknown = JSON.parse(r.body);
      if (c.response) assertJson(api, body, c.response);
      if (c.error) assertErrorBody(body, c.error);
    });
  }
});

describe("transcoding with Google's error shape", () => {
  let backend: LibraryBackend;
  let gw: TestGateway;

  before(async () => {
    backend = await startLibraryBackend();
    const service = { name: "library", grpc: { host: "127.0.0.1", port: backend.port }, transcoding: { errors: "google" } } as ServiceConfig;
    gw = await startTestGateway({ services: [service] });
    await routesServed(gw, ["/v1/messages/ready"]);
  });

  after(async () => {
    await gw?.close();
    backend?.close();
  });

  it("NOT_FOUND is 404 with {error: {code: 404, message, status, details}}", async () => {
    // AIP_193: "code": the HTTP status code, "message": a developer-facing message, "status": the google.rpc.Code
    // name, "details": the google.rpc.Status details.
    const r = await request(gw.http, "GET", "/v1/shelves/s1/books/nope");
    assert.equal(r.status, 404, r.body);
    assert.deepEqual(JSON.parse(r.body), { error: { code: 404, message: "book shelves/s1/books/nope not found", status: "NOT_FOUND", details: [] } });
  });
});
