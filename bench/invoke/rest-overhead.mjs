// CPU per REST invoke call of the router's route lookup and the invoke path's metrics (two counter incs and two
// histogram observes, as the REST router and the dispatch op record them), in-process, for one or more checkouts
// with `npm run build` done: a real thread's route-table shape (48 routes, invoke-json among the last). Prints the
// median of 5 timed loops of 300,000 calls per checkout; alternate the checkouts and run it twice.
//
//   node bench/invoke/rest-overhead.mjs /tmp/base . /tmp/base .
for (const arg of process.argv.slice(2)) {
  const dir = new URL(`${arg.replace(/\/$/, "")}/`, `file://${process.cwd()}/`).href;
  const { createMetrics } = await import(`${dir}dist/src/observe/metrics.js`);
  const { createRouteTable } = await import(`${dir}dist/src/http/router.js`);
  const { createAuthenticator } = await import(`${dir}dist/src/ops/auth.js`);
  const m = createMetrics({ processMetrics: false });
  const req = m.counter("platform_http_requests_total", "h", ["route", "method", "status"]);
  const lat = m.histogram("platform_http_request_duration_seconds", "h", ["route", "method", "status"]);
  const inv = m.counter("platform_gateway_invocations_total", "h", ["service", "code"]);
  const ilat = m.histogram("platform_gateway_invocation_duration_seconds", "h", ["service", "code"]);
  const h = async () => ({});
  // A route table shaped like a uWS thread's: 44 routes, params and literals, invoke-json among the later ones.
  const paths = ["/v1/config/services", "/v1/config/services/{name}", "/v1/state/{store}/{key+}", "/v1/state/{store}/bulk", "/v1/state/{store}/query",
    "/v1/publish/{topic}", "/v1/subscriptions", "/v1/subscriptions/{id}", "/v1/triggers", "/v1/triggers/{id}", "/health", "/metrics",
    "/v1/web/tokens", "/v1/web/sse/{topic}", "/console", "/console/{file+}", "/v1/grpc/{service}/{method}", "/v1/gateway/list-services",
    "/v1/gateway/list-methods", "/v1/gateway/method-schema", "/v1/gateway/protos", "/v1/gateway/invoke-stream", "/v1/gateway/invoke", "/v1/gateway/invoke-json"];
  const routes = [];
  for (const p of paths) for (const method of ["GET", "POST"]) routes.push({ method, path: p, handler: h });
  const resolve = createRouteTable(routes, { auth: createAuthenticator([]), isClosing: () => false });
  const headers = { "content-type": "application/json" };
  const N = 300000;
  function run() {
    for (let i = 0; i < N; i++) {
      const d = resolve("POST", "/v1/gateway/invoke-json", headers);
      if (!d.route) throw new Error("no route");
      const status = 200, v = (i % 100) / 10000;
      inv.inc({ service: "inventory", code: "OK" });
      ilat.observe({ service: "inventory", code: "OK" }, v);
      req.inc({ route: "/v1/gateway/invoke-json", method: "POST", status });
      lat.observe({ route: "/v1/gateway/invoke-json", method: "POST", status }, v);
    }
  }
  run(); run();
  const res = [];
  for (let r = 0; r < 5; r++) { const t = process.cpuUsage(); run(); const u = process.cpuUsage(t); res.push((u.user + u.system) / N); }
  res.sort((a, b) => a - b);
  console.log(arg, "us per call (median of 5):", res[2].toFixed(3), "all", res.map((x) => x.toFixed(3)).join(" "));
}
