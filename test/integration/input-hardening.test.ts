import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect as connectHttp2, constants as h2 } from "node:http2";
import { connect as connectTcp } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { fromJson, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { gatewayRegistry } from "../../src/shared/protos.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { reflectionCall } from "../support/reflection.js";
import { runCli, startGatewayProcess } from "../support/cli.js";

/** Input hardening: echoed input is cut, decoding is strict, ambiguous or oversized input is refused. */

const KEY = "k1";
const services = [{ name: "orders", pubsub: { pubsubName: "pubsub" }, state: { storeName: "orders-store", keys: [] } }];
const auth = { "x-api-key": KEY, "content-type": "application/json" };

/** One gRPC call over a raw HTTP/2 stream: hand-made frame bytes in, status and message out. */
function rawGrpc(address: string, path: string, frame: Buffer, extraHeaders: Record<string, string> = {}): Promise<{ status: string; message: string; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const session = connectHttp2(`http://${address}`);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no answer on ${path} within 5 s`));
    }, 5000);
    session.on("error", reject);
    const req = session.request({
      [h2.HTTP2_HEADER_METHOD]: "POST",
      [h2.HTTP2_HEADER_PATH]: path,
      "content-type": "application/grpc",
      te: "trailers",
      "x-api-key": KEY,
      ...extraHeaders,
    });
    const chunks: Buffer[] = [];
    let status = "";
    let message = "";
    const take = (headers: Record<string, unknown>): void => {
      if (headers["grpc-status"] !== undefined) status = String(headers["grpc-status"]);
      if (headers["grpc-message"] !== undefined) message = decodeURIComponent(String(headers["grpc-message"]));
    };
    req.on("response", take);
    req.on("trailers", take);
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      clearTimeout(timer);
      session.close();
      resolve({ status, message, body: Buffer.concat(chunks) });
    });
    req.on("error", reject);
    req.end(frame);
  });
}

/** A gRPC length-prefixed frame. */
function frame(payload: Buffer, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

function encode(typeName: string, value: JsonObject): Buffer {
  const type = gatewayRegistry().getMessage(typeName)!;
  return Buffer.from(toBinary(type, fromJson(type, value)));
}

/** One HTTP/1.1 request written by hand (repeated headers, oversized heads); resolves the status line and body. */
function rawHttp(port: number, head: string, body = ""): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connectTcp(port, "127.0.0.1");
    let out = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("no HTTP answer within 5 s"));
    }, 5000);
    socket.on("data", (d) => {
      out += d.toString("latin1");
      const end = out.indexOf("\r\n\r\n");
      const len = /content-length: (\d+)/i.exec(out);
      if (end >= 0 && len && out.length >= end + 4 + Number(len[1])) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ status: Number(out.slice(9, 12)), body: out.slice(end + 4) });
      }
    });
    socket.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      reject(new Error(`connection closed without a whole answer: ${JSON.stringify(out.slice(0, 80))}`));
    });
    socket.write(head + body);
  });
}

describe("input hardening", () => {
  let gw: TestGateway;
  let port: number;
  before(async () => {
    gw = await startTestGateway({ services, apiKeys: [KEY] });
    port = Number(new URL(gw.http).port);
  });
  after(() => gw.close());

  const stored = async (key: string): Promise<number> => (await fetch(`${gw.http}/v1/state/orders/${key}`, { headers: auth })).status;

  describe("echoed input is cut (item 5)", () => {
    const huge = "n".repeat(1024 * 1024);

    it("a 1 MiB name in Config.GetService gets a short NOT_FOUND, and the connection keeps working", async () => {
      const c = gw.client("platform.Config");
      const deadline = () => ({ deadline: Date.now() + 5000 });
      await assert.rejects(unary(c, "GetService", { name: huge }, withKey(KEY), deadline()), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.NOT_FOUND);
        assert.ok(e.details.length < 1200, `details are ${e.details.length} characters`);
        assert.match(e.details, /^service n{256}…\(1048320 more characters\) is not registered$/);
        return true;
      });
      const list = await unary(c, "ListServices", {}, withKey(KEY), deadline());
      assert.deepEqual(list.services.map((s: { name: string }) => s.name), ["orders"]);
    });

    it("a 1 MiB service name gives a short REST 404", async () => {
      const res = await fetch(`${gw.http}/v1/state/save-state`, { method: "POST", headers: auth, body: JSON.stringify({ service: huge, key: "a", value: "b" }) });
      assert.equal(res.status, 404);
      const text = await res.text();
      assert.ok(text.length < 1200, `body is ${text.length} bytes`);
      assert.match(text, /more characters\) is not registered/);
    });

    it("a 2 MiB Unsubscribe id gives a short reply", async () => {
      const c = gw.client("io.cloudevents.v1.Pubsub");
      const r = await unary(c, "Unsubscribe", { subscription_id: "s".repeat(2 * 1024 * 1024) }, withKey(KEY), { deadline: Date.now() + 5000 });
      assert.equal(r.status.status, "NOT_FOUND");
      assert.ok(r.status.message.length < 1200, `message is ${r.status.message.length} characters`);
    });

    it("a 2 MiB reflection symbol gives a short answer", async () => {
      const md = withKey(KEY);
      const res = await reflectionCall(gw.grpcAddress, "v1", { file_containing_symbol: "x".repeat(2 * 1024 * 1024) }, md);
      assert.equal(res.error_response.error_code, grpc.status.NOT_FOUND);
      assert.ok(res.error_response.error_message.length < 1200);
      assert.ok(res.original_request.file_containing_symbol.length < 1200);
    });
  });

  describe("strict decoding (item 7)", () => {
    it("a request truncated inside a length-delimited field is INVALID_ARGUMENT, not a shorter message", async () => {
      const r = await rawGrpc(gw.grpcAddress, "/platform.Config/GetService", frame(Buffer.from([0x0a, 0x64, 0x61])));
      assert.equal(r.status, String(grpc.status.INVALID_ARGUMENT), r.message);
      assert.match(r.message, /truncated: field name declares 100 bytes but 1 remain/);
    });

    it("a truncated SaveState stores nothing", async () => {
      const whole = encode("platform.SaveStateRequest", { service: "orders", key: "cut" });
      const r = await rawGrpc(gw.grpcAddress, "/platform.State/SaveState", frame(Buffer.concat([whole, Buffer.from([0x1a, 0x64, 0x61])])));
      assert.equal(r.status, String(grpc.status.INVALID_ARGUMENT), r.message);
      assert.equal(await stored("cut"), 404);
    });

    it("a message with the compressed flag and no grpc-encoding is INTERNAL and runs nothing", async () => {
      const payload = encode("platform.SaveStateRequest", { service: "orders", key: "flagged", value: "v" });
      const r = await rawGrpc(gw.grpcAddress, "/platform.State/SaveState", frame(payload, true));
      assert.equal(r.status, String(grpc.status.INTERNAL), r.message);
      assert.match(r.message, /compressed flag/);
      assert.equal(await stored("flagged"), 404);
      // The same bytes uncompressed are fine: the refusal is about the flag.
      const ok = await rawGrpc(gw.grpcAddress, "/platform.State/SaveState", frame(payload));
      assert.equal(ok.status, "0", ok.message);
    });

    it("invalid UTF-8 in a protobuf string field is INVALID_ARGUMENT naming the field, nothing stored", async () => {
      const head = encode("platform.SaveStateRequest", { service: "orders", key: "utf" });
      const bad = Buffer.concat([head, Buffer.from([0x1a, 0x03, 0x61, 0xff, 0x62])]);
      const r = await rawGrpc(gw.grpcAddress, "/platform.State/SaveState", frame(bad));
      assert.equal(r.status, String(grpc.status.INVALID_ARGUMENT), r.message);
      assert.match(r.message, /field value is not valid UTF-8/);
      assert.equal(await stored("utf"), 404);
    });

    it("invalid UTF-8 in a REST JSON body is 400 naming the field, nothing stored", async () => {
      const body = Buffer.concat([Buffer.from('{"service":"orders","key":"utf-rest","value":"a'), Buffer.from([0xff]), Buffer.from('b"}')]);
      const res = await fetch(`${gw.http}/v1/state/save-state`, { method: "POST", headers: auth, body });
      assert.equal(res.status, 400);
      const e = (await res.json()) as { message: string };
      assert.equal(e.message, "request body is not valid UTF-8 (in value)");
      assert.equal(await stored("utf-rest"), 404);
    });
  });

  describe("ambiguity and small holes (item 8)", () => {
    it("two x-api-key headers on REST are refused in either order", async () => {
      for (const [a, b] of [
        [KEY, "wrong"],
        ["wrong", KEY],
        [KEY, KEY],
      ]) {
        const r = await rawHttp(port, `GET /v1/config/list-services HTTP/1.1\r\nhost: x\r\nx-api-key: ${a}\r\nx-api-key: ${b}\r\n\r\n`);
        assert.equal(r.status, 401, `${a} then ${b}`);
        assert.match(r.body, /x-api-key is given more than once/);
      }
      const one = await rawHttp(port, `GET /v1/config/list-services HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`);
      assert.equal(one.status, 200);
    });

    it("a forged query page.token is INVALID_ARGUMENT; issued tokens page", async () => {
      for (const k of ["p1", "p2", "p3"]) {
        assert.equal((await fetch(`${gw.http}/v1/state/save-state`, { method: "POST", headers: auth, body: JSON.stringify({ service: "orders", key: k, value: '{"g":"page"}' }) })).status, 200);
      }
      const q = (page: object) => `${gw.http}/v1/state/orders/query?query=${encodeURIComponent(JSON.stringify({ filter: { EQ: { g: "page" } }, page }))}`;
      const first = await fetch(q({ limit: 2 }), { headers: auth });
      assert.equal(first.status, 200);
      const p1 = (await first.json()) as { items: unknown[]; token: string };
      assert.equal(p1.items.length, 2);
      assert.notEqual(p1.token, "");
      const second = (await (await fetch(q({ limit: 2, token: p1.token }), { headers: auth })).json()) as { items: unknown[]; token: string };
      assert.equal(second.items.length, 1);
      for (const forged of ["999", "1", p1.token.replace(/.$/, (c) => (c === "A" ? "B" : "A"))]) {
        const res = await fetch(q({ limit: 2, token: forged }), { headers: auth });
        assert.equal(res.status, 400, `token ${forged}`);
        assert.match(((await res.json()) as { message: string }).message, /page\.token .* is not a token this gateway issued/);
      }
    });

    it("CR/LF in /v1/grpc/call metadata is INVALID_ARGUMENT", async () => {
      const res = await fetch(`${gw.http}/v1/grpc/call`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ service: "orders", method: "M", request: {}, metadata: { "x-request-id": "a\r\nx-api-key: stolen" } }),
      });
      const r = (await res.json()) as { error: boolean; statusCode: string; data: string };
      assert.equal(r.error, true);
      assert.equal(r.statusCode, "INVALID_ARGUMENT");
      assert.match(r.data, /metadata\.x-request-id must not contain control characters/);
    });

    it("an oversized URL is 414 and oversized headers are 431, not a reset", async () => {
      const url = await rawHttp(port, `GET /v1/state/orders/${"a".repeat(10_000)} HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`);
      assert.equal(url.status, 414);
      assert.match(url.body, /the limit is 4096/);
      const big = await rawHttp(port, `GET /v1/config/list-services HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\nx-big: ${"b".repeat(9000)}\r\n\r\n`);
      assert.equal(big.status, 431);
      const many = Array.from({ length: 42 }, (_, i) => `x-h${i}: v\r\n`).join("");
      const count = await rawHttp(port, `GET /v1/config/list-services HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n${many}\r\n`);
      assert.equal(count.status, 431);
      assert.match(count.body, /header lines; the limit is 40/);
    });

    it("header bytes count names and values once, a repeated header as its joined value: 8192 passes, 8193 is 431", async () => {
      // host: x (4 + 1), x-api-key: k1 (9 + 2), x-rep: aa twice (joined "aa, aa": 5 + 6), x-big: 5 + n.
      const head = (n: number) => `GET /v1/config/list-services HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\nx-rep: aa\r\nx-rep: aa\r\nx-big: ${"b".repeat(n)}\r\n\r\n`;
      const fixed = 5 + 11 + 11 + 5;
      assert.equal((await rawHttp(port, head(8192 - fixed))).status, 200);
      const over = await rawHttp(port, head(8193 - fixed));
      assert.equal(over.status, 431);
      assert.match(over.body, /the request headers total 8193 bytes; the limit is 8192/);
    });

    it("a header named like an object's own property (constructor, toString) is a header like any other", async () => {
      // host: x (4 + 1), x-api-key: k1 (9 + 2), constructor: aa (11 + 2), tostring: aa (8 + 2), x-big: 5 + n. Read into a
      // plain object, `constructor` found Object.prototype's and was counted as a repeat (2 + 2). (uWS refuses `__proto__`.)
      const head = (n: number) =>
        `GET /v1/config/list-services HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\nconstructor: aa\r\ntoString: aa\r\nx-big: ${"b".repeat(n)}\r\n\r\n`;
      const fixed = 5 + 11 + 13 + 10 + 5;
      assert.equal((await rawHttp(port, head(8192 - fixed))).status, 200);
      const over = await rawHttp(port, head(8193 - fixed));
      assert.equal(over.status, 431);
      assert.match(over.body, /the request headers total 8193 bytes; the limit is 8192/);
    });

    it("publish refuses a CloudEvent spec version other than 1.0", async () => {
      const event = { specversion: "0.3", id: "e1", source: "urn:test", type: "t", data: {} };
      const res = await fetch(`${gw.http}/v1/pubsub/t1`, { method: "POST", headers: { ...auth, "content-type": "application/cloudevents+json" }, body: JSON.stringify(event) });
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { message: string }).message, /^cloudevent\.spec_version '0\.3' is not supported/);
      const ok = await fetch(`${gw.http}/v1/pubsub/t1`, { method: "POST", headers: { ...auth, "content-type": "application/cloudevents+json" }, body: JSON.stringify({ ...event, specversion: "1.0" }) });
      assert.match(await ok.text(), /"success":true/);
    });
  });

  describe("--forward-header credential guard (item 8)", () => {
    it("refuses header names that look like credentials", async () => {
      for (const h of ["x-amz-security-token", "x-goog-iap-jwt-assertion", "x-authorization", "x-session-token", "x-upstream-api-key", "X-Client-Secret"]) {
        await assert.rejects(startTestGateway({ forwardHeaders: ["traceparent", h] }), (e: Error) => {
          assert.match(e.message, /looks like a credential/);
          assert.match(e.message, /--forward-credential-header/);
          return true;
        });
      }
    });

    it("forwards one when the override names it, and logs a warning", async () => {
      const g = await startTestGateway({ forwardHeaders: ["traceparent", "x-session-token"], forwardCredentialHeaders: ["x-session-token"] });
      try {
        const warn = g.logs.find((l) => String(l["msg"]).includes("OVERRIDE"));
        assert.ok(warn, "a warning names the override");
        assert.equal(warn["level"], "warn");
        assert.deepEqual(warn["headers"], ["x-session-token"]);
      } finally {
        await g.close();
      }
      // The always-forbidden names stay forbidden, override or not.
      await assert.rejects(startTestGateway({ forwardHeaders: ["authorization"], forwardCredentialHeaders: ["authorization"] }), /carries authority/);
      await assert.rejects(startTestGateway({ forwardCredentialHeaders: ["x-session-token"] }), /forwardHeaders also lists/);
    });

    it("the CLI refuses such a --forward-header, and --forward-credential-header (or its variable) overrides it loudly", async () => {
      const refused = await runCli(["--grpc-port", "0", "--http-port", "0", "--forward-header", "x-amz-security-token"]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /x-amz-security-token: the name looks like a credential \(it contains token\)/);
      const gp = await startGatewayProcess(["--forward-header", "traceparent", "--forward-header", "x-upstream-api-key"], {
        GATEWAY_FORWARD_CREDENTIAL_HEADERS: "x-upstream-api-key",
      });
      try {
        const warn = gp.stdout.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => String(l["msg"]).startsWith("OVERRIDE"));
        assert.deepEqual(warn?.["headers"], ["x-upstream-api-key"]);
      } finally {
        assert.equal((await gp.stop()).code, 0);
      }
    });
  });
});
