import { after, describe, test } from "node:test";
import http from "node:http";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, createFileRegistry, fromBinary, setExtension, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { httpRequest, type HttpReply } from "../support/http-request.js";
import { startLibraryBackend, type LibraryBackend } from "../support/backends/library-backend.js";
import { encodedFileDescriptorProtos, LIBRARY_PROTO } from "../support/protos/descriptors.js";
import type { ServiceConfig } from "../../src/config/services.js";
import { validateServicesConfig } from "../../src/config/services.js";
import { routesLoaded, until } from "../support/transcode.js";

const json = (r: HttpReply): any => JSON.parse(r.body);
const lib = (name: string, b: LibraryBackend, transcoding?: Record<string, unknown>): ServiceConfig =>
  ({ name, grpc: { host: "127.0.0.1", port: b.port }, ...(transcoding ? { transcoding } : {}) }) as ServiceConfig;

/** The library descriptors with GetBook's `google.api.http` rule replaced by GET `path`. */
function withGetBookPath(path: string): Uint8Array[] {
  const files = encodedFileDescriptorProtos(LIBRARY_PROTO);
  const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: files.map((f) => fromBinary(FileDescriptorProtoSchema, f)) }));
  const ext = registry.getExtension("google.api.http")!;
  const rule = registry.getMessage("google.api.HttpRule") as DescMessage;
  return files.map((bytes) => {
    const fd = fromBinary(FileDescriptorProtoSchema, bytes);
    if (fd.name !== LIBRARY_PROTO) return bytes;
    const m = fd.service.find((s) => s.name === "Library")!.method.find((x) => x.name === "GetBook")!;
    setExtension(m.options!, ext, create(rule, { pattern: { case: "get", value: path } }) as never);
    return toBinary(FileDescriptorProtoSchema, fd);
  });
}

describe("REST transcoding: configuration, conflicts, refresh, threads", () => {
  const open: Array<{ close(): unknown }> = [];
  after(async () => {
    for (const o of open.reverse()) await o.close();
  });
  const gateway = async (services: ServiceConfig[], threads = 1, schemaRefreshIntervalMs?: number): Promise<TestGateway> => {
    const gw = await startTestGateway({ services, threads, ...(schemaRefreshIntervalMs ? { schemaRefreshIntervalMs } : {}) });
    open.push(gw);
    return gw;
  };
  const backend = async (opts?: Parameters<typeof startLibraryBackend>[0]): Promise<LibraryBackend> => {
    const b = await startLibraryBackend(opts);
    open.push(b);
    return b;
  };

  test("prefix and Google's error shape per service", async () => {
    const b = await backend();
    const gw = await gateway([lib("library", b, { prefix: "/lib", errors: "google" })]);
    await routesLoaded(gw.http, "/lib/v1/shelves/p/books");
    let r = await httpRequest(gw.http, "GET", "/lib/v1/shelves/p/books/nope");
    assert.equal(r.status, 404);
    assert.deepEqual(json(r), { error: { code: 404, message: "book shelves/p/books/nope not found", status: "NOT_FOUND", details: [] } });
    r = await httpRequest(gw.http, "GET", "/v1/shelves/p/books");
    assert.equal(r.status, 404, "no route at the root with a prefix");
    r = await httpRequest(gw.http, "GET", "/lib/v1/shelves/p/books?page_size=x");
    assert.equal(r.status, 400);
    assert.equal(json(r).error.status, "INVALID_ARGUMENT");
    r = await httpRequest(gw.http, "GET", "/lib/v1/shelves/fail-ABORTED/books:watch");
    assert.equal(r.status, 409);
    assert.deepEqual(JSON.parse(r.body.trim()), { error: { code: 409, message: "failed as asked by shelves/fail-ABORTED", status: "ABORTED", details: [] } });
  });

  test("apiConfig rules replace the annotations; enabled: false serves none", async () => {
    const dir = mkdtempSync(join(tmpdir(), "transcode-"));
    const file = join(dir, "api.yaml");
    writeFileSync(
      file,
      [
        "type: google.api.Service",
        "config_version: 3",
        "http:",
        "  rules:",
        "    - selector: library.v1.Library.GetBook",
        "      get: /books/{name=**}",
        "      additional_bindings:",
        "        - post: /books:get",
        "          body: '*'",
        "    - selector: library.v1.Library.Unannotated",
        "      get: /unannotated/{name}",
      ].join("\n"),
    );
    const b = await backend();
    const off = await backend();
    const gw = await gateway([lib("library", b, { apiConfig: file }), lib("quiet", off, { enabled: false })]);
    await routesLoaded(gw.http);
    await httpRequest(gw.http, "POST", "/v1/shelves/c/books?request_id=b", { title: "T" });
    let r = await httpRequest(gw.http, "GET", "/books/shelves/c/books/b");
    assert.equal(r.status, 200, r.body);
    assert.equal(json(r).title, "T");
    r = await httpRequest(gw.http, "POST", "/books:get", { name: "shelves/c/books/b" });
    assert.equal(r.status, 200, r.body);
    r = await httpRequest(gw.http, "GET", "/unannotated/zzz");
    assert.equal(r.status, 404);
    assert.equal(b.calls.at(-1)!.method, "Unannotated");
    r = await httpRequest(gw.http, "GET", "/v1/shelves/c/books/b");
    assert.equal(r.status, 405, "the annotation is replaced (the path keeps its PATCH, PUT and DELETE rules)");
    assert.equal(off.calls.length, 0);
  });

  test("an error after messages is the stream's last line: the gateway shutting down ends a watch in-band", async () => {
    const b = await backend();
    const gw = await startTestGateway({ services: [lib("library", b)] });
    await routesLoaded(gw.http);
    let closing: Promise<void> | undefined;
    const lines = await new Promise<string[]>((resolve, reject) => {
      const req = http.request(`${gw.http}/v1/shelves/s/books:watch?page_token=forever`, { agent: false }, (res) => {
        assert.equal(res.statusCode, 200);
        let buf = "";
        res.on("data", (c: Buffer) => {
          buf += c.toString();
          if (!closing && buf.split("\n").length > 3) closing = gw.close();
        });
        res.on("end", () => resolve(buf.trim().split("\n")));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.setTimeout(10_000, () => req.destroy(new Error("the watch did not end")));
      req.end();
    });
    await closing;
    assert.ok(lines.length >= 3, lines.join("\n"));
    assert.deepEqual(JSON.parse(lines[0]!), { result: { name: "shelves/s/books/f1" } });
    assert.deepEqual(JSON.parse(lines.at(-1)!), { error: { code: 14, message: "the gateway is shutting down", details: [] } });
    await until("the backend saw the cancel", () => b.cancelled.includes("WatchBooks shelves/s"));
  });

  test("the services file is validated with clear errors", () => {
    const bad = (transcoding: unknown): string => {
      try {
        validateServicesConfig({ services: [{ name: "s", grpc: { host: "h", port: 1 }, transcoding }] });
      } catch (e) {
        return (e as Error).message;
      }
      return "";
    };
    assert.match(bad({ prefix: "lib" }), /service "s".transcoding.prefix: must be literal path segments/);
    assert.match(bad({ prefix: "/lib/" }), /transcoding.prefix/);
    assert.match(bad({ errors: "json" }), /transcoding.errors: must be "grpc-gateway" or "google"/);
    assert.match(bad({ enabled: "yes" }), /transcoding.enabled: must be true or false/);
    assert.match(bad({ colour: 1 }), /transcoding: unknown field "colour"/);
    assert.match(bad({ apiConfig: "/nonexistent/api.yaml" }), /transcoding.apiConfig \(\/nonexistent\/api.yaml\): cannot be read/);
    const dir = mkdtempSync(join(tmpdir(), "transcode-"));
    const file = join(dir, "api.yaml");
    writeFileSync(file, "http:\n  rules:\n    - selector: a.B.*\n      get: /x\n    - selector: a.B.C\n      get: x/{y\n");
    const msg = bad({ apiConfig: file });
    assert.match(msg, /http.rules\[0\].selector: must be a full method name/);
    assert.match(msg, /http.rules\[1\]: path template "x\/\{y" must start with \//);
  });

  test("two backends with the same route: the first keeps it, the other is refused with a log line and a /health entry", async () => {
    const first = await backend();
    const second = await backend();
    const gw = await gateway([lib("first", first), lib("second", second)]);
    await routesLoaded(gw.http);
    const refused = "GET /v1/{name=shelves/*/books/*} (second library.v1.Library.GetBook) is refused: GET /v1/{name=shelves/*/books/*} (first library.v1.Library.GetBook) already has that method and path";
    await until("both schemas", () => gw.logs.some((l) => l["rule"] === refused));
    await httpRequest(gw.http, "GET", "/v1/shelves/x/books/y");
    assert.equal(first.calls.at(-1)!.method, "GetBook");
    assert.equal(second.calls.length, 0);
    const line = gw.logs.find((l) => l["rule"] === refused)!;
    assert.equal(line["level"], "warn");
    assert.equal(line["msg"], "transcoding rule refused");
    const health = json(await httpRequest(gw.http, "GET", "/health"));
    assert.equal(health.entries.transcoding.status, "Degraded");
    assert.ok(health.entries.transcoding.description.includes(refused), health.entries.transcoding.description);
  });

  test("a rule another backend's restart lets in shows in the OpenAPI document of its own backend, whose schema did not change", async () => {
    const first = await backend();
    const second = await backend();
    const port = first.port;
    const gw = await gateway([lib("first", first), lib("second", second)]);
    await routesLoaded(gw.http);
    const getBook = (doc: any): unknown => doc["paths"]?.["/v1/shelves/{shelf}/books/{book}"]?.["get"];
    const secondDoc = async (): Promise<any> => json(await httpRequest(gw.http, "GET", "/v1/grpc/second/openapi.json"));
    await until("the refusal in second's document", async () => ((await secondDoc())["x-problems"] ?? []).some((p: any) => p.method === "library.v1.Library.GetBook"));
    assert.equal(getBook(await secondDoc()), undefined, "first holds GET /v1/{name=shelves/*/books/*}");
    first.close();
    const restarted = await backend({ port, files: withGetBookPath("/v2/{name=shelves/*/books/*}") });
    await until("first's new route", async () => {
      await httpRequest(gw.http, "GET", "/v2/shelves/r/books/b");
      return restarted.calls.some((c) => c.method === "GetBook");
    }, 15_000);
    await httpRequest(gw.http, "GET", "/v1/shelves/r/books/b");
    assert.equal(second.calls.at(-1)?.method, "GetBook", "second now answers GET /v1/{name=shelves/*/books/*}");
    // The same schema of second, a different table: its cached document is not served again.
    const doc = await secondDoc();
    assert.ok(getBook(doc), "second's GetBook is now served and described");
    assert.ok(!(doc["x-problems"] ?? []).some((p: any) => p.method === "library.v1.Library.GetBook"));
  });

  test("a backend restarted with a changed annotation changes the routes, with no gateway restart", async () => {
    const b = await backend();
    const port = b.port;
    const gw = await gateway([lib("library", b)]);
    await routesLoaded(gw.http);
    await httpRequest(gw.http, "POST", "/v1/shelves/r/books?request_id=b", { title: "Old" });
    assert.equal((await httpRequest(gw.http, "GET", "/v1/shelves/r/books/b")).status, 200);
    b.close();
    await backend({ port, files: withGetBookPath("/v2/{name=shelves/*/books/*}") });
    await httpRequest(gw.http, "POST", "/v1/shelves/r/books?request_id=b", { title: "New" }).catch(() => undefined);
    // Within one refresh: the gateway reflects again once its channel to the backend is READY after the restart.
    await until("the new route", async () => (await httpRequest(gw.http, "GET", "/v2/shelves/r/books/b")).status === 200, 15_000);
    assert.equal(json(await httpRequest(gw.http, "GET", "/v2/shelves/r/books/b")).title, "New");
    // The path still has PATCH, PUT and DELETE rules: GET on it is now 405.
    const old = await httpRequest(gw.http, "GET", "/v1/shelves/r/books/b");
    assert.equal(old.status, 405);
    assert.match(json(old).message, /method GET is not allowed on \/v1\/shelves\/r\/books\/b; allowed: PATCH, PUT, DELETE/);
    assert.ok(gw.logs.some((l) => l["msg"] === "backend reconnected: reflecting its schema again"));
  });

  test("--threads 2: every thread serves the routes from the schemas the main thread pushes (reflected every 100 ms)", async () => {
    const b = await backend();
    const gw = await gateway([lib("library", b)], 2, 100);
    // The thread a connection lands on may not have its routes yet: create until one answers (same name each time).
    await until("the create route", async () => (await httpRequest(gw.http, "POST", "/v1/shelves/t/books?request_id=b", { title: "Threads" })).status === 200);
    await until("a route on every thread", async () => {
      // One connection per request: the kernel spreads them over both threads.
      const got = await Promise.all(Array.from({ length: 16 }, () => httpRequest(gw.http, "GET", "/v1/shelves/t/titles")));
      return got.every((r) => r.status === 200);
    });
    // Periodic reflections of an unchanged schema leave the routes as they are.
    await new Promise((r) => setTimeout(r, 350));
    const got = await Promise.all(Array.from({ length: 16 }, () => httpRequest(gw.http, "GET", "/v1/shelves/t/titles")));
    for (const r of got) assert.deepEqual(json(r), ["Threads"]);
  });
});
