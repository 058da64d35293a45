import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli, startGatewayProcess } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "gw-cli-"));
function configFile(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

function assertNoStack(stderr: string): void {
  assert.doesNotMatch(stderr, /^\s+at /m, "no stack trace");
}

describe("CLI", () => {
  it("--help lists every flag", async () => {
    const r = await runCli(["--help"]);
    assert.equal(r.code, 0);
    for (const flag of ["--config", "--host", "--grpc-port", "--http-port", "--sidecar", "--pubsub-name", "--api-key", "--log-level"]) {
      assert.ok(r.stdout.includes(flag), flag);
    }
  });

  it("refuses a non-loopback host without an API key, saying why", async () => {
    const r = await runCli(["--host", "0.0.0.0", "--grpc-port", "0", "--http-port", "0"]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /refusing to serve on non-loopback host 0\.0\.0\.0 without an API key/);
    assertNoStack(r.stderr);
  });

  it("an unknown flag is a usage error", async () => {
    const r = await runCli(["--grpc-prot", "1"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /grpc-prot/);
  });

  it("config validation reports every problem with the entry and field, and exits non-zero", async () => {
    const path = configFile(
      "bad.yaml",
      `services:
  - name: orders
    grpc: {host: 127.0.0.1, port: "50051"}
    colour: blue
  - name: billing
    state: {storeName: "", keys: []}
`,
    );
    const r = await runCli(["--config", path, "--grpc-port", "0", "--http-port", "0"]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /service "orders": unknown field "colour"/);
    assert.match(r.stderr, /service "orders"\.grpc\.port: must be an integer 1-65535 \(got "50051"\)/);
    assert.match(r.stderr, /service "billing"\.state\.storeName: must be a non-empty string/);
    assertNoStack(r.stderr);
  });

  it("entries that disagree on the pub/sub component name stop startup, naming them", async () => {
    const path = configFile(
      "mismatch.json",
      JSON.stringify({ services: [{ name: "a", pubsub: { pubsubName: "one" } }, { name: "b", pubsub: { pubsubName: "two" } }] }),
    );
    const r = await runCli(["--config", path, "--grpc-port", "0", "--http-port", "0"]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /pubsubName must be the same for every entry; found one \(a\) vs two \(b\)/);
    assertNoStack(r.stderr);
  });

  it("logs one 'gateway listening' line with the bound ports, serves, and exits 0 on SIGTERM within the bound", async () => {
    const gw = await startGatewayProcess(["--shutdown-timeout", "3000"], { GATEWAY_WARMUP_CALLS: "", GATEWAY_WARMUP_EVENTS: "" });
    const listening = gw.stdout.filter((l) => l.includes('"msg":"gateway listening"'));
    assert.equal(listening.length, 1);
    const line = JSON.parse(listening[0]!) as { level: string; grpcPort: number; httpPort: number };
    assert.equal(line.level, "info");
    assert.ok(line.grpcPort > 0 && line.httpPort > 0);
    // The CLI's default warm-up ran before it listened: every event reached every private subscriber, and every
    // invoke came back as its echo.
    const warmed = gw.stdout.findIndex((l) => l.includes('"msg":"warmed up"'));
    assert.ok(warmed >= 0 && warmed < gw.stdout.indexOf(listening[0]!), "the warm-up is logged before 'gateway listening'");
    const w = JSON.parse(gw.stdout[warmed]!) as { events: number; subscribers: number; deliveries: number; calls: number };
    assert.deepEqual([w.events, w.deliveries, w.calls], [1000, 1000 * w.subscribers, 1000]);
    const res = await fetch(`http://127.0.0.1:${gw.httpPort}/v1/config/list-services`);
    assert.equal(res.status, 200);
    assert.deepEqual(((await res.json()) as { services: Array<{ name: string }> }).services.map((s) => s.name), ["platform"]);
    const { code, ms } = await gw.stop("SIGTERM");
    assert.equal(code, 0);
    assert.ok(ms < 3000, `exited after ${ms} ms`);
  });

  it("the pub/sub name flag wins over the config", async () => {
    const gw = await startGatewayProcess(["--pubsub-name", "custom-pubsub"]);
    const { code } = await gw.stop("SIGINT");
    assert.equal(code, 0);
    const line = JSON.parse(gw.stdout.find((l) => l.includes('"msg":"gateway listening"'))!) as { pubsubName: string };
    assert.equal(line.pubsubName, "custom-pubsub");
  });

  it("the config's pub/sub name applies when no flag is given", async () => {
    const path = configFile("named.yaml", "services:\n  - name: a\n    pubsub: {pubsubName: redis-pubsub}\n");
    const gw = await startGatewayProcess(["--config", path]);
    await gw.stop();
    const line = JSON.parse(gw.stdout.find((l) => l.includes('"msg":"gateway listening"'))!) as { pubsubName: string };
    assert.equal(line.pubsubName, "redis-pubsub");
  });
});
