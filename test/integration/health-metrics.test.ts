import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createEmbeddedRuntime } from "../../src/runtime/embedded/index.js";
import type { Runtime, RuntimeHealth } from "../../src/runtime/runtime.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { checkPromText } from "../support/prom-text.js";
import { freePort } from "../support/ports.js";

const TIME_SPAN = /^\d{2}:\d{2}:\d{2}\.\d{7}$/;

/** An embedded runtime whose sidecar health the test sets. */
function runtimeWithHealth(health: () => RuntimeHealth): Runtime {
  const inner = createEmbeddedRuntime({ pubsubName: "pubsub", logger: console as never });
  return { ...inner, kind: inner.kind, health: async () => health() };
}

describe("/health", () => {
  let sidecar: RuntimeHealth = { status: "Healthy", description: "ok" };
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: ["k"] }, { runtime: runtimeWithHealth(() => sidecar) });
  });
  after(() => gw.close());

  it("reports status, totalDuration as a time span, and the sidecar and grpc-channel-pool entries", async () => {
    const res = await fetch(`${gw.http}/health`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { status: string; totalDuration: string; entries: Record<string, { status: string; description: string }> };
    assert.deepEqual(Object.keys(body).sort(), ["entries", "status", "totalDuration"]);
    assert.equal(body.status, "Healthy");
    assert.match(body.totalDuration, TIME_SPAN);
    for (const name of ["sidecar", "grpc-channel-pool"]) {
      const e = body.entries[name];
      assert.ok(e, `entry ${name}`);
      assert.equal(typeof e.status, "string");
      assert.equal(typeof e.description, "string");
    }
    assert.deepEqual(body.entries["sidecar"], { status: "Healthy", description: "ok" });
  });

  it("is 200 when Degraded and 503 when Unhealthy, with the worst entry as status", async () => {
    sidecar = { status: "Degraded", description: "reconnecting" };
    let res = await fetch(`${gw.http}/health`);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { status: string }).status, "Degraded");
    sidecar = { status: "Unhealthy", description: "sidecar unreachable" };
    res = await fetch(`${gw.http}/health`);
    assert.equal(res.status, 503);
    const body = (await res.json()) as { status: string; entries: Record<string, { status: string; description: string }> };
    assert.equal(body.status, "Unhealthy");
    assert.equal(body.entries["sidecar"]!.description, "sidecar unreachable");
    sidecar = { status: "Healthy", description: "ok" };
  });
});

describe("/health driven by a non-sidecar entry", () => {
  let gw: TestGateway;
  before(async () => {
    // A registered backend nothing listens on: its channels cannot connect while the sidecar stays Healthy.
    const port = await freePort();
    gw = await startTestGateway(
      { apiKeys: ["k"], services: [{ name: "down", grpc: { host: "127.0.0.1", port } }] },
      { runtime: runtimeWithHealth(() => ({ status: "Healthy", description: "ok" })) },
    );
  });
  after(() => gw.close());

  it("is Degraded (200) from grpc-channel-pool alone, naming the backend, while the sidecar is Healthy", async () => {
    type Report = { status: string; entries: Record<string, { status: string; description: string }> };
    let body: Report | undefined;
    const end = Date.now() + 5000;
    while (Date.now() < end) {
      const res = await fetch(`${gw.http}/health`);
      assert.equal(res.status, 200, "Degraded is still 200");
      body = (await res.json()) as Report;
      if (body.status !== "Healthy") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(body?.entries["sidecar"]?.status, "Healthy");
    assert.equal(body?.entries["grpc-channel-pool"]?.status, "Degraded");
    assert.match(body!.entries["grpc-channel-pool"]!.description, /not connected: down \(127\.0\.0\.1:\d+/);
    assert.equal(body?.status, "Degraded", "the report takes the worst entry, not the sidecar's");
  });
});

describe("/metrics", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({});
  });
  after(() => gw.close());

  it("is valid Prometheus text with help on every family, process metrics and per-route request counts", async () => {
    await fetch(`${gw.http}/v1/config/list-services`);
    await fetch(`${gw.http}/v1/config/get-service`); // a 400
    const res = await fetch(`${gw.http}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
    const text = await res.text();
    assert.match(text, /^process_cpu_user_seconds_total \d/m);
    assert.match(text, /^platform_http_requests_total\{route="\/v1\/config\/list-services",method="GET",status="200"\} 1$/m);
    assert.match(text, /^platform_http_requests_total\{route="\/v1\/config\/get-service",method="GET",status="400"\} 1$/m);
    assert.match(text, /^# HELP platform_http_request_duration_seconds \S/m);
    // Every metric family has help text.
    const families = new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]));
    for (const f of families) assert.match(text, new RegExp(`^# HELP ${f} \\S`, "m"), `help text of ${f}`);
    // The exposition format, checked in-process (test/support/prom-text.ts: syntax, HELP/TYPE, names, labels,
    // duplicates, histogram consistency, promtool's lint rules). prom-client's own nodejs_active_*_total gauges draw
    // one lint finding each; ours must draw none. .ci/run also runs the reference parser, `promtool check metrics`.
    const { problems, families: parsed } = checkPromText(text);
    assert.deepEqual(problems.filter((p) => !/^nodejs_active_\w+_total non-counter/.test(p)), []);
    assert.equal(parsed.get("platform_http_request_duration_seconds")?.type, "histogram");
    assert.ok((parsed.get("platform_http_request_duration_seconds")?.samples.length ?? 0) > 0, "the request histogram has samples");
  });
});
