import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, httpStatusOf } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createRestRequest, createRouteTable, errorBody, type RestReply, type Route, type RestServerDeps } from "../../src/http/router.js";

/**
 * The gateway's REST routes served by `node:http` instead of uWS, doing the same per-request work as
 * `src/http/router.ts` (the same route table with its auth and shutdown gate (`createRouteTable`), body collection with a limit, lazy JSON parsing, JSON reply, the same
 * metrics): the baseline that shows what uWS buys. Bench-only: the gateway never serves REST with it.
 */
export function startNodeHttpServer(host: string, port: number, routes: Route[], deps: RestServerDeps): Promise<{ port: number; server: Server }> {
  const resolveRoute = createRouteTable(routes, deps);
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const started = performance.now();
    const method = (req.method ?? "GET").toUpperCase();
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q >= 0 ? url.slice(0, q) : url;
    const query = new URLSearchParams(q >= 0 ? url.slice(q + 1) : "");
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
    const ac = new AbortController();
    let done = false;
    let routeName = "unmatched";
    res.on("close", () => {
      if (!done) ac.abort(new GatewayError(Code.CANCELLED, "the client closed the request"));
    });
    const send = (reply: RestReply): void => {
      if (done) return;
      done = true;
      const status = reply.status ?? 200;
      const payload = reply.raw ?? JSON.stringify(reply.body ?? null);
      res.writeHead(status, STATUS_CODES[status] ?? "", { "content-type": reply.contentType ?? "application/json", ...reply.headers });
      res.end(payload);
      deps.requests.inc({ route: routeName, method, status });
      deps.latency.observe({ route: routeName, method, status }, (performance.now() - started) / 1000);
    };
    const fail = (e: unknown): void => {
      const err = GatewayError.from(e);
      send({ status: httpStatusOf(err.code), body: errorBody(err) });
    };
    try {
      const decision = resolveRoute(method, path, headers);
      if (decision.route) routeName = decision.route.path;
      if (decision.reply) return send(decision.reply);
      const route = decision.route!;
      const run = (body: Buffer): void => {
        route.handler(createRestRequest(method, path, decision.params, query, headers, body, ac.signal)).then(send, fail);
      };
      if (method === "GET") return run(Buffer.alloc(0));
      const chunks: Buffer[] = [];
      let size = 0;
      req.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > deps.maxBodyBytes) {
          req.destroy();
          return send({ status: 413, body: errorBody(new GatewayError(Code.RESOURCE_EXHAUSTED, `request body exceeds the limit of ${deps.maxBodyBytes} bytes`)) });
        }
        chunks.push(chunk);
      });
      req.on("end", () => run(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    } catch (e) {
      fail(e);
    }
  };
  const server = createServer({ keepAlive: true }, handle);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve({ port: (server.address() as AddressInfo).port, server }));
  });
}
