import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { httpRequest, type HttpReply } from "../support/http-request.js";
import { startLibraryBackend, type LibraryBackend } from "../support/backends/library-backend.js";
import { routesLoaded, until } from "../support/transcode.js";
import type { ServiceConfig } from "../../src/config/services.js";

const KEY = "transcode-key";
const H = { "x-api-key": KEY };


const json = (r: HttpReply): any => JSON.parse(r.body);

function lastCall(b: LibraryBackend, method: string): { request: Record<string, unknown>; metadata: Record<string, string> } {
  const c = [...b.calls].reverse().find((x) => x.method === method);
  assert.ok(c, `the backend got no ${method} call`);
  return c;
}

describe("REST transcoding from google.api.http annotations", () => {
  let backend: LibraryBackend;
  let gw: TestGateway;

  before(async () => {
    backend = await startLibraryBackend();
    const services = [{ name: "library", grpc: { host: "127.0.0.1", port: backend.port } }] as ServiceConfig[];
    gw = await startTestGateway({ services, apiKeys: [KEY], forwardHeaders: ["x-request-tag"] });
    await routesLoaded(gw.http, undefined, H);
  });
  after(async () => {
    await gw?.close();
    backend?.close();
  });

  test("POST with body: field, GET, PATCH and PUT with a nested path variable, DELETE", async () => {
    let r = await httpRequest(gw.http, "POST", "/v1/shelves/s1/books?request_id=b1", { title: "Dune", author: "Herbert", genre: "GENRE_FICTION", tags: ["sf"] }, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(json(r), { name: "shelves/s1/books/b1", title: "Dune", author: "Herbert", genre: "GENRE_FICTION", tags: ["sf"] });
    assert.deepEqual(lastCall(backend, "CreateBook").request, { parent: "shelves/s1", book: { title: "Dune", author: "Herbert", genre: "GENRE_FICTION", tags: ["sf"] }, request_id: "b1" });

    r = await httpRequest(gw.http, "GET", "/v1/shelves/s1/books/b1", undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.equal(json(r).title, "Dune");
    assert.deepEqual(lastCall(backend, "GetBook").request, { name: "shelves/s1/books/b1" });

    r = await httpRequest(gw.http, "PATCH", "/v1/shelves/s1/books/b1?update_mask=title,page_count", { title: "Dune Messiah" }, H);
    assert.equal(r.status, 200, r.body);
    assert.equal(json(r).title, "Dune Messiah");
    assert.deepEqual(lastCall(backend, "UpdateBook").request, { book: { name: "shelves/s1/books/b1", title: "Dune Messiah" }, update_mask: "title,pageCount" });

    r = await httpRequest(gw.http, "PUT", "/v1/shelves/s1/books/b1", { title: "Children of Dune", pages: 444 }, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(lastCall(backend, "ReplaceBook").request, { book: { name: "shelves/s1/books/b1", title: "Children of Dune", pages: 444 } });

    r = await httpRequest(gw.http, "DELETE", "/v1/shelves/s1/books/b1", undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, "{}");
    r = await httpRequest(gw.http, "GET", "/v1/shelves/s1/books/b1", undefined, H);
    assert.equal(r.status, 404);
    assert.deepEqual(json(r), { code: 5, message: "book shelves/s1/books/b1 not found", details: [] });
  });

  test("query parameters: typed, repeated, nested, enums, well-known types, bytes", async () => {
    const q =
      "page_size=5&pageToken=t&genre=GENRE_POETRY&tags=a&tags=b&published_after=2024-01-02T03:04:05Z&read_mask=title,page_count" +
      "&min_pages=7&filter.author=Ann&filter.pages.min=3&max_age=1.5s&include_archived=true&ids=1&ids=9007199254740993&min_rating=4.5&cursor=AQID";
    const r = await httpRequest(gw.http, "GET", `/v1/shelves/q/books?${q}`, undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(lastCall(backend, "ListBooks").request, {
      parent: "shelves/q",
      page_size: 5,
      page_token: "t",
      genre: "GENRE_POETRY",
      tags: ["a", "b"],
      published_after: "2024-01-02T03:04:05Z",
      read_mask: "title,pageCount",
      min_pages: 7,
      filter: { author: "Ann", pages: { min: 3 } },
      max_age: "1.500s",
      include_archived: true,
      ids: ["1", "9007199254740993"],
      min_rating: 4.5,
      cursor: "AQID",
    });
    const byNumber = await httpRequest(gw.http, "GET", "/v1/shelves/q/books?genre=2", undefined, H);
    assert.equal(byNumber.status, 200, byNumber.body);
    assert.equal(lastCall(backend, "ListBooks").request["genre"], "GENRE_HISTORY");
  });

  test("a bad or unknown query parameter is 400 naming it, and the backend is not called", async () => {
    const before = backend.calls.length;
    for (const [q, words] of [
      ["page_size=many", "query parameter page_size must be an integer"],
      ["genre=GENRE_JAZZ", "query parameter genre must be a value of library.v1.Genre"],
      ["colour=red", "query parameter colour is not a field of library.v1.ListBooksRequest"],
      ["include_archived=yes", "query parameter include_archived must be true or false"],
      ["published_after=yesterday", "query parameter published_after must be an RFC 3339 timestamp"],
      ["page_size=1&page_size=2", "query parameter page_size is given more than once"],
      ["parent=shelves/x", "query parameter parent is set by the path"],
      ["filter=x", "query parameter filter is a message"],
    ] as const) {
      const r = await httpRequest(gw.http, "GET", `/v1/shelves/q/books?${q}`, undefined, H);
      assert.equal(r.status, 400, `${q}: ${r.body}`);
      const b = json(r);
      assert.equal(b.code, 3);
      assert.ok(b.message.startsWith(words), `${q}: ${b.message}`);
      assert.deepEqual(b.details, []);
    }
    assert.equal(backend.calls.length, before);
  });

  test("body * with a :verb, response_body, ** paths, custom method, additional bindings", async () => {
    await httpRequest(gw.http, "POST", "/v1/shelves/s2/books?request_id=b2", { title: "Emma" }, H);
    let r = await httpRequest(gw.http, "POST", "/v1/shelves/s2/books/b2:archive", { reason: "old", name: "ignored" }, H);
    assert.equal(r.status, 200, r.body);
    assert.equal(json(r).archived, true);
    assert.deepEqual(lastCall(backend, "ArchiveBook").request, { name: "shelves/s2/books/b2", reason: "old" });

    r = await httpRequest(gw.http, "GET", "/v1/shelves/s2/titles", undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(json(r), ["Emma"]);
    r = await httpRequest(gw.http, "GET", "/v1/shelves/empty/titles", undefined, H);
    assert.deepEqual(json(r), []);

    r = await httpRequest(gw.http, "GET", "/v1/files/a/b%2Fc/d%20e.txt", undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(lastCall(backend, "GetFile").request, { path: "a/b%2Fc/d e.txt" });

    // uWebSockets.js drops a request with a method it does not know: a custom kind such as PURGE is refused, in /health.
    const health = json(await httpRequest(gw.http, "GET", "/health"));
    assert.equal(health.entries.transcoding.status, "Degraded");
    assert.match(health.entries.transcoding.description, /PURGE \/v1\/\{name=shelves\/\*\}\/cache \(library library\.v1\.Library\.PurgeShelf\) is refused: the HTTP server \(uWebSockets\.js\) receives only GET/);

    r = await httpRequest(gw.http, "GET", "/v5/users/u1/messages/m%2F1", undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(lastCall(backend, "GetUserMessage").request, { message_id: "m/1", user_id: "u1" });
    r = await httpRequest(gw.http, "GET", "/v5/messages/m2?user_id=u2", undefined, H);
    assert.deepEqual(lastCall(backend, "GetUserMessage").request, { message_id: "m2", user_id: "u2" });
  });

  test("Messaging: google/api/http.proto's own examples", async () => {
    let r = await httpRequest(gw.http, "GET", "/v1/messages/123456", undefined, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(lastCall(backend, "GetMessage").request, { name: "messages/123456" });
    r = await httpRequest(gw.http, "GET", "/v2/messages/123456?revision=2&sub.subfield=foo", undefined, H);
    assert.deepEqual(json(r), { messageId: "123456", revision: "2", subfield: "foo" });
    assert.deepEqual(lastCall(backend, "GetMessageById").request, { message_id: "123456", revision: "2", sub: { subfield: "foo" } });
    r = await httpRequest(gw.http, "PATCH", "/v3/messages/123456", { text: "Hi!" }, H);
    assert.deepEqual(lastCall(backend, "UpdateMessage").request, { message_id: "123456", message: { text: "Hi!" } });
    r = await httpRequest(gw.http, "PATCH", "/v4/messages/123456", { text: "Hi!" }, H);
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(lastCall(backend, "UpdateMessageFields").request, { message_id: "123456", text: "Hi!" });
  });

  test("errors: gRPC code to HTTP status, 404 and 405, the api key, metadata allow-list", async () => {
    for (const [code, status] of [
      ["NOT_FOUND", 404],
      ["PERMISSION_DENIED", 403],
      ["UNAVAILABLE", 503],
      ["FAILED_PRECONDITION", 400],
      ["ALREADY_EXISTS", 409],
    ] as const) {
      const r = await httpRequest(gw.http, "GET", `/v1/shelves/fail-${code}/titles`, undefined, H);
      assert.equal(r.status, status, r.body);
      assert.equal(json(r).message, `failed as asked by shelves/fail-${code}`);
    }
    let r = await httpRequest(gw.http, "GET", "/v1/nowhere", undefined, H);
    assert.equal(r.status, 404);
    r = await httpRequest(gw.http, "POST", "/v1/shelves/s1/books/b1", {}, H);
    assert.equal(r.status, 405);
    r = await httpRequest(gw.http, "GET", "/v1/shelves/s1/titles");
    assert.equal(r.status, 401);
    r = await httpRequest(gw.http, "GET", "/v1/shelves/meta/titles", undefined, { ...H, "x-request-tag": "t1", "x-other": "no" });
    const md = lastCall(backend, "ListTitles").metadata;
    assert.equal(md["x-request-tag"], "t1");
    assert.equal(md["x-api-key"], undefined);
    assert.equal(md["x-other"], undefined);
    // Bad body JSON and a bad path value are 400s in the same shape.
    r = await httpRequest(gw.http, "POST", "/v1/shelves/s1/books", "{nope", H);
    assert.equal(r.status, 400);
    assert.match(json(r).message, /request body is not valid JSON/);
    r = await httpRequest(gw.http, "GET", "/v1/files/%E0%A4%A", undefined, H);
    assert.equal(r.status, 400);
  });

  test("the gateway's own routes win; the routes count in the REST metrics by template", async () => {
    const r = await httpRequest(gw.http, "GET", "/v1/gateway/list-services", undefined, H);
    assert.deepEqual(json(r), { services: ["library"] });
    const m = await httpRequest(gw.http, "GET", "/metrics");
    assert.match(m.body, /platform_http_requests_total\{route="\/v1\/\{name=shelves\/\*\/books\/\*\}",method="GET",status="200"\} \d+/);
    assert.match(m.body, /platform_gateway_invocations_total\{service="library",code="OK"\} \d+/);
  });

  test("server streaming answers NDJSON; an error ends it in-band; a client leaving cancels the backend", async () => {
    await httpRequest(gw.http, "POST", "/v1/shelves/w/books?request_id=x1", { title: "A" }, H);
    await httpRequest(gw.http, "POST", "/v1/shelves/w/books?request_id=x2", { title: "B" }, H);
    let r = await httpRequest(gw.http, "GET", "/v1/shelves/w/books:watch", undefined, H);
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.body.trim().split("\n").map((l) => JSON.parse(l)),
      [{ result: { name: "shelves/w/books/x1", title: "A" } }, { result: { name: "shelves/w/books/x2", title: "B" } }],
    );
    r = await httpRequest(gw.http, "GET", "/v1/shelves/fail-ABORTED/books:watch", undefined, H);
    assert.deepEqual(
      r.body.trim().split("\n").map((l) => JSON.parse(l)),
      [{ error: { code: 10, message: "failed as asked by shelves/fail-ABORTED", details: [] } }],
    );

    // A watch that never ends: read a few lines, leave, and the backend sees the cancel.
    const lines = await new Promise<string[]>((resolve, reject) => {
      const req = http.request(`${gw.http}/v1/shelves/forever/books:watch?page_token=forever`, { headers: H, agent: false }, (res) => {
        let buf = "";
        res.on("data", (c: Buffer) => {
          buf += c.toString();
          const got = buf.split("\n").filter(Boolean);
          if (got.length >= 3) {
            req.destroy();
            resolve(got);
          }
        });
      });
      req.on("error", (e) => (e.message.includes("socket hang up") ? undefined : reject(e)));
      req.setTimeout(10_000, () => reject(new Error("no stream lines")));
      req.end();
    });
    assert.deepEqual(JSON.parse(lines[0]!), { result: { name: "shelves/forever/books/f1" } });
    await until("the backend saw the cancel", () => backend.cancelled.includes("WatchBooks shelves/forever"));
  });
});
