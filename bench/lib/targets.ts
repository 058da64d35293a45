import { targetOf } from "./figure.js";
import type { Figure, RunMode } from "./schema.js";

/**
 * The targets, attached to the figures they judge when the suite did not judge them itself:
 * invoke added p50 < 150 us (1 KB, c=1) and throughput >= 0.45 of direct (c=64); fan-out CPU per delivery <= 1.2x the
 * raw grpc-js baseline and < 10 KB per idle subscriber at 10,000; web fan-out WebSocket CPU per delivery
 * <= 1.3x bare uWS, SSE <= 2x, <= 2 KB per idle WebSocket subscriber, and WebSocket at least 5x cheaper per delivery
 * than gRPC Subscribe (ratio <= 0.2). Peers (the shared harness): gRPC Subscribe CPU per delivery at or below nats-server's
 * with one connection per subscriber and at most 1.5x with 100 per connection, at most 8 KB (3 KB multiplexed) per
 * idle gRPC subscriber; invoke c=1 added p99 at or below grpc-gateway's in every repetition on both fronts, c=64
 * calls/s at least 2x grpc-gateway's; the transparent proxy's CPU per call and c=1 added p50 at or below nginx's.
 */
export function applyTargets(suite: string, figures: Figure[], mode: RunMode): Figure[] {
  const judged = figures.map((f) => judge(suite, f));
  // Dry-run counts are far too small to judge anything.
  return mode === "dry-run" ? judged.map((f) => (f.target ? { ...f, target: { text: f.target.text, met: null } } : f)) : judged;
}

function judge(suite: string, f: Figure): Figure {
  if (f.target) return f;
  const id = f.id.toLowerCase();
  if (suite === "invoke") {
    if (id.startsWith("added-p50-1kb-c1")) return { ...f, target: targetOf("added p50 < 150 us", f.value, "<", 150) };
    if (id.startsWith("throughput-") && id.endsWith("-c64")) return { ...f, target: targetOf("ratio >= 0.45", f.ratio, ">=", 0.45) };
  }
  if (suite === "fanout") {
    if (id.includes("cpu") && f.baseline) return { ...f, target: targetOf("ratio <= 1.2", f.ratio, "<=", 1.2) };
    if (id.includes("10000") && (id.includes("idle") || id.includes("per-subscriber") || id.includes("memory")) && f.unit.toLowerCase().startsWith("b")) {
      const kb = f.unit.toLowerCase() === "kb" || f.unit.toLowerCase() === "kib" ? f.value : f.value / 1024;
      return { ...f, target: targetOf("< 10 KB per idle subscriber", kb, "<", 10) };
    }
  }
  if (suite === "web-fanout") {
    if (/^ws-cpu-per-delivery-/.test(id)) return { ...f, target: targetOf("ratio <= 1.3", f.ratio, "<=", 1.3) };
    if (/^sse-cpu-per-delivery-/.test(id)) return { ...f, target: targetOf("ratio <= 2", f.ratio, "<=", 2) };
    if (/^ws-idle-bytes-per-subscriber-/.test(id)) return { ...f, target: targetOf("<= 2 KB per idle subscriber", f.value, "<=", 2048) };
    if (/^ws-vs-grpc-cpu-per-delivery-/.test(id)) return { ...f, target: targetOf("ratio <= 0.2 (>= 5x less CPU)", f.ratio, "<=", 0.2) };
  }
  if (suite === "peers") {
    if (/^fanout-grpc-conn-cpu-per-delivery-/.test(id)) return { ...f, target: targetOf("ratio <= 1 (at or below nats-server)", f.ratio, "<=", 1) };
    if (/^fanout-grpc-mux100-cpu-per-delivery-/.test(id)) return { ...f, target: targetOf("ratio <= 1.5", f.ratio, "<=", 1.5) };
    if (/^fanout-grpc-conn-idle-bytes-per-subscriber-/.test(id)) return { ...f, target: targetOf("<= 8 KB per idle subscriber", f.value, "<=", 8 * 1024) };
    if (/^fanout-grpc-mux100-idle-bytes-per-subscriber-/.test(id)) return { ...f, target: targetOf("<= 3 KB per idle subscriber", f.value, "<=", 3 * 1024) };
    if (/^invoke-c1-added-p99-(grpc|rest)-worst$/.test(id)) return { ...f, target: targetOf("ratio <= 1 in every repetition", f.ratio, "<=", 1) };
    if (/^invoke-c64-calls-per-s-(grpc|rest)$/.test(id)) return { ...f, target: targetOf("ratio >= 2", f.ratio, ">=", 2) };
    if (id === "invoke-c64-cpu-per-call-proxy" || id === "invoke-c1-added-p50-proxy") return { ...f, target: targetOf("ratio <= 1 (at or below nginx)", f.ratio, "<=", 1) };
  }
  return f;
}
