import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, httpStatusOf } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { errorBody, jsonObjectBody, type RestReply, type RestRequest, type Route, type RestServerDeps } from "../../src/main/rest/router.js";

interface Compiled {
  route: Route;
  parts: string[];
}

function match(c: Compiled, parts: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < c.parts.length; i++) {
    const seg = c.parts[i]!;
    const m = /^\{([A-Za-z_]+)(\+?)\}$/.exec(seg);
    if (!m) {
      if (parts[i] !== seg) return undefined;
      continue;
    }
    if (m[2] === "+") {
      const rest = parts.slice(i);
      if (rest.length === 0 || rest.some((p) => p === "")) return undefined;
      params[m[1]!] = rest.map(decodeURIComponent).join("/");
      return params;
    }
    if (!parts[i]) return undefined;
    params[m[1]!] = decodeURIComponent(parts[i]!);
  }
  return parts.length === c.parts.length ? params : undefined;
}

/**
 * The gateway's REST routes served by `node:http` instead of uWS, doing the same per-request work as
 * `src/main/rest/router.ts` (route match, auth, body collection with a limit, lazy JSON parsing, JSON reply, the same
 * metrics): the baseline that shows what uWS buys. Bench-only: the gateway never serves REST with it.
 */
export function startNodeHttpServer(host: string, port: number, routes: Route[], deps: RestServerDeps): Promise<{ port: number; server: Server }> {
  const compiled = routes.map((route) => ({ route, parts: route.path.split("/").slice(1) }));
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
      const parts = path.split("/").slice(1);
      let best: { c: Compiled; params: Record<string, string> } | undefined;
      for (const c of compiled) {
        if (c.route.method !== method) continue;
        const params = match(c, parts);
        if (params && !best) best = { c, params };
      }
      if (!best) return fail(new GatewayError(Code.NOT_FOUND, `no route for ${method} ${path}`));
      const { route } = best.c;
      routeName = route.path;
      if (deps.isClosing()) return fail(new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down"));
      if (route.auth !== false && !deps.auth.check(headers["x-api-key"])) return fail(new GatewayError(Code.UNAUTHENTICATED, "missing or invalid x-api-key"));
      const run = (body: Buffer): void => {
        const request: RestRequest = {
          method,
          path,
          params: best.params,
          query,
          headers,
          body,
          signal: ac.signal,
          json: () => jsonObjectBody(body),
        };
        route.handler(request).then(send, fail);
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
