import { readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join } from "node:path";
import { packageRoot } from "../shared/paths.js";
import type { RestReply, Route } from "../http/router.js";
import { echo } from "../shared/echo.js";

/** Where the console's files live: shipped as they are (no build step), found from the package root. */
export function consoleDir(): string {
  return join(packageRoot(), "src", "console", "static");
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

/**
 * Same-origin only, no inline script: the console talks to this gateway and nothing else. `connect-src 'self'` covers
 * fetch and EventSource; nothing is loaded from anywhere else.
 */
const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

/**
 * The web console's routes: `GET /console` (redirect), `/console/` (the page) and `/console/{file}`. The files are
 * public, as any page's markup is; every data call the page makes carries the signed-in x-api-key like any client's.
 * The files are read once, here: only names present at startup are served, so a path can never leave the folder.
 */
export function consoleRoutes(dir = consoleDir()): Route[] {
  const files = new Map<string, RestReply>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (!type || !statSync(join(dir, name)).isFile()) continue;
    files.set(name, { raw: readFileSync(join(dir, name)), contentType: type, headers: SECURITY_HEADERS });
  }
  const index = files.get("index.html");
  if (!index) throw new Error(`platform-gateway: the console folder ${dir} has no index.html`);
  return [
    { method: "GET", path: "/console", auth: false, handler: async () => ({ status: 308, raw: "", contentType: "text/plain", headers: { location: "/console/" } }) },
    { method: "GET", path: "/console/", auth: false, handler: async () => index },
    {
      method: "GET",
      path: "/console/{file}",
      auth: false,
      handler: async (req) => {
        const f = files.get(req.params["file"]!);
        if (f) return f;
        // The name is echoed: the same headers as the files (nosniff, CSP), so no browser renders it as markup.
        return { status: 404, raw: `no console file ${echo(req.params["file"]!, 64)}`, contentType: "text/plain; charset=utf-8", headers: SECURITY_HEADERS };
      },
    },
  ];
}
