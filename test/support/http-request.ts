import http from "node:http";

/** A reply as a test reads it. */
export interface HttpReply {
  status: number;
  body: string;
}

/**
 * One HTTP/1.1 request on its own connection (no keep-alive), so successive requests to a gateway with uWS threads
 * land on any thread (the kernel picks one per connection). A JSON body unless `body` is a string; 10 s bound.
 */
export function httpRequest(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const req = http.request(`${base}${path}`, { method, agent: false, headers: { ...(payload ? { "content-type": "application/json" } : {}), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end(payload);
  });
}
