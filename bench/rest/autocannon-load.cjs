/**
 * Load-generator child of the REST benchmark (bench/rest/index.ts forks one or more): autocannon's programmatic API,
 * plain CommonJS so no TypeScript loader runs in the measured client. A separate process, so the generator has a core
 * of its own beside the server and its CPU can be read from /proc/<pid>/stat (bench/lib/proc.ts) without the
 * server's or the parent's.
 *
 * IPC protocol (advanced serialization, so Buffers and Float64Arrays cross as such):
 *   parent -> {type: "config", url, method, headers, body?, connections, durationMs, maxRequests, warmupMs,
 *              warmupMax, expectStatus}
 *   child  -> {type: "ready"}                 after loading autocannon and running the warm-up (not measured)
 *   parent -> {type: "go"}
 *   child  -> {type: "result", requests, errors, firstError?, elapsedMs, latenciesUs: Float64Array}
 * The child exits when the parent disconnects.
 *
 * autocannon's own latency histogram has 1 ms resolution, too coarse for loopback; each response's duration
 * (autocannon's hrtime-based `responseTime`, ms with sub-us precision) is kept from its `response` event instead.
 */
"use strict";
const { performance } = require("node:perf_hooks");
const autocannon = require("autocannon");

let config;

/** Run autocannon once with `config`, bounded by `durationMs` and `maxRequests`; latencies only when `keep`. */
function run(durationMs, maxRequests, keep) {
  return new Promise((resolve, reject) => {
    const lat = keep ? new Float64Array(maxRequests) : undefined;
    let n = 0;
    let wrongStatus = 0;
    let firstError;
    const t0 = performance.now();
    let lastAt = t0;
    const instance = autocannon(
      {
        url: config.url,
        method: config.method,
        headers: config.headers,
        body: config.body ? Buffer.from(config.body) : undefined,
        connections: config.connections,
        pipelining: 1,
        duration: durationMs / 1000,
        // autocannon acts on its stop condition at each sample tick: a short tick ends the run near durationMs.
        sampleInt: 250,
        maxOverallRequests: maxRequests,
        timeout: 10,
      },
      (err, result) => {
        if (err) return reject(err);
        // Up to the last response: once maxRequests are done the clients idle until the next tick.
        const elapsedMs = lastAt - t0;
        const errors = result.errors + result.timeouts + wrongStatus;
        if (result.errors + result.timeouts > 0) firstError ??= `${result.errors} connection errors, ${result.timeouts} timeouts`;
        resolve({ requests: n, errors, firstError, elapsedMs, latenciesUs: lat ? lat.subarray(0, Math.min(n, maxRequests)) : new Float64Array(0) });
      },
    );
    instance.on("response", (_client, statusCode, _bytes, responseTimeMs) => {
      if (statusCode !== config.expectStatus) {
        wrongStatus++;
        firstError ??= `status ${statusCode} (expected ${config.expectStatus})`;
      }
      if (lat && n < lat.length) lat[n] = responseTimeMs * 1000;
      n++;
      lastAt = performance.now();
    });
    instance.on("reqError", (e) => {
      firstError ??= e && e.message ? e.message : String(e);
    });
  });
}

process.on("message", (m) => {
  if (m.type === "config") {
    config = m;
    run(m.warmupMs, m.warmupMax, false).then(
      () => process.send({ type: "ready" }),
      (e) => process.send({ type: "failed", message: String(e && e.message ? e.message : e) }),
    );
  } else if (m.type === "go") {
    // The generator's own CPU over the measured run, in microseconds (/proc's 10 ms ticks read 0 on a short run).
    const c0 = process.cpuUsage();
    run(config.durationMs, config.maxRequests, true).then(
      (r) => {
        const c = process.cpuUsage(c0);
        process.send({ type: "result", ...r, cpuUs: c.user + c.system });
      },
      (e) => process.send({ type: "failed", message: String(e && e.message ? e.message : e) }),
    );
  }
});
process.on("disconnect", () => process.exit(0));
