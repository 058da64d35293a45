/**
 * The OpenAPI routes on a real gateway in front of the annotated library backend: with and without the key, the
 * combined and per-service documents (validated), a backend that is down, uWS worker threads, and a backend restarted
 * with a changed proto showing in the document after a refresh.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Validator } from "@seriousme/openapi-schema-validator";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { startLibraryBackend, type LibraryBackend } from "../support/backends/library-backend.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { freePort } from "../support/ports.js";
import { httpRequest } from "../support/http-request.js";
import { encodedFileDescriptorProtos, LIBRARY_PROTO } from "../support/protos/descriptors.js";

const KEY = "openapi-key";
type Obj = Record<string, any>;

async function validDocument(gw: TestGateway, path: string): Promise<Obj> {
  const r = await httpRequest(gw.http, "GET", path, undefined, { "x-api-key": KEY });
  assert.equal(r.status, 200, r.body);
  const doc = JSON.parse(r.body) as Obj;
  const v = new Validator();
  const res = await v.validate(doc);
  assert.ok(res.valid, JSON.stringify(res.errors));
  assert.equal(v.version, "3.1");
  return doc;
}

for (const threads of [1, 2]) {
  describe(`OpenAPI routes (--threads ${threads})`, () => {
    let backend: LibraryBackend;
    let gw: TestGateway;
    let downPort: number;
    before(async () => {
      backend = await startLibraryBackend();
      downPort = await freePort();
      gw = await startTestGateway({
        threads,
        apiKeys: [KEY],
        services: [
          { name: "library", grpc: { host: "127.0.0.1", port: backend.port, channels: 1 } },
          { name: "down", grpc: { host: "127.0.0.1", port: downPort, channels: 1 } },
        ],
      });
    });
    after(async () => {
      await gw.close();
      backend.close();
    });

    it("refuses both routes without the key", async () => {
      for (const path of ["/v1/openapi.json", "/v1/grpc/library/openapi.json"]) {
        const r = await httpRequest(gw.http, "GET", path);
        assert.equal(r.status, 401, path);
        assert.match(r.body, /x-api-key/);
      }
    });

    it("serves the combined document on every thread: the library's operations, the down backend named", async () => {
      // One connection per request: with threads, the kernel spreads them over the threads.
      for (let i = 0; i < 2 * threads; i++) {
        const doc = await validDocument(gw, "/v1/openapi.json");
        assert.equal(doc["paths"]["/v1/shelves/{shelf}/books/{book}"]["get"]["summary"], "Gets one book.");
        assert.deepEqual(doc["security"], [{ apiKey: [] }]);
        assert.equal(doc["x-unavailable"].length, 1);
        assert.equal(doc["x-unavailable"][0]["service"], "down");
        assert.equal(typeof doc["x-unavailable"][0]["message"], "string");
      }
    });

    it("serves one backend's document, 404 for an unknown service, the reflection error for a down one", async () => {
      const doc = await validDocument(gw, "/v1/grpc/library/openapi.json");
      assert.equal(doc["info"]["title"], "Platform Gateway: library");
      // The document describes what the gateway serves: PURGE is a method uWS cannot receive, so the rule is refused.
      assert.equal(doc["x-custom-operations"], undefined);
      const purge = (doc["x-problems"] as Array<Record<string, string>>).find((p) => p["method"] === "library.v1.Library.PurgeShelf");
      assert.match(purge?.["message"] ?? "", /PURGE \/v1\/\{name=shelves\/\*\}\/cache is refused: the HTTP server \(uWebSockets\.js\) receives only/);
      const unknown = await httpRequest(gw.http, "GET", "/v1/grpc/nope/openapi.json", undefined, { "x-api-key": KEY });
      assert.equal(unknown.status, 404);
      assert.match(JSON.parse(unknown.body).message, /service nope is not registered/);
      const down = await httpRequest(gw.http, "GET", "/v1/grpc/down/openapi.json", undefined, { "x-api-key": KEY });
      assert.ok(down.status >= 500, `${down.status} ${down.body}`);
      assert.equal(typeof JSON.parse(down.body).message, "string");
    });
  });
}

describe("OpenAPI document after a backend restart with a changed proto", () => {
  it("shows the new proto after the next refresh, with no gateway restart", async () => {
    let backend = await startLibraryBackend();
    const port = backend.port;
    const gw = await startTestGateway({ threads: 2, apiKeys: [KEY], services: [{ name: "library", grpc: { host: "127.0.0.1", port, channels: 1 } }] });
    try {
      const before = await validDocument(gw, "/v1/grpc/library/openapi.json");
      assert.equal(before["paths"]["/v1/shelves/{shelf}/books/{book}"]["get"]["summary"], "Gets one book.");
      // The same API with GetBook's comment changed: decode library.proto's descriptor, edit its source info.
      const files = encodedFileDescriptorProtos(LIBRARY_PROTO).map((bytes) => {
        const fd = fromBinary(FileDescriptorProtoSchema, bytes);
        if (fd.name !== LIBRARY_PROTO) return bytes;
        for (const loc of fd.sourceCodeInfo?.location ?? []) if (loc.leadingComments === " Gets one book.\n") loc.leadingComments = " Gets one book, changed.\n";
        return toBinary(FileDescriptorProtoSchema, fd);
      });
      backend.close();
      backend = await startLibraryBackend({ files, port });
      // A refresh, as the gateway's reflection routes ask for one; the threads get the main thread's new schema.
      const refreshed = await httpRequest(gw.http, "GET", "/v1/grpc/library/methods?refresh=true", undefined, { "x-api-key": KEY });
      assert.equal(refreshed.status, 200, refreshed.body);
      const deadline = Date.now() + 10_000;
      let summary = "";
      while (Date.now() < deadline) {
        const doc = await validDocument(gw, "/v1/grpc/library/openapi.json");
        summary = doc["paths"]["/v1/shelves/{shelf}/books/{book}"]["get"]["summary"];
        if (summary === "Gets one book, changed.") break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(summary, "Gets one book, changed.");
      assert.notEqual((await validDocument(gw, "/v1/grpc/library/openapi.json"))["info"]["version"], before["info"]["version"]);
    } finally {
      await gw.close();
      backend.close();
    }
  });
});
