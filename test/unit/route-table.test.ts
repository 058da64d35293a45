import { test } from "node:test";
import assert from "node:assert/strict";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createAuthenticator } from "../../src/ops/auth.js";
import { createRouteTable, json, type Route, type RouteDecision } from "../../src/http/router.js";

// createRouteTable's decisions where routes without parameters (looked up by exact path, the invoke hot path) and
// routes with parameters overlap: the same winner, parameters, 405 Allow list, shutdown and x-api-key answers as the
// scan over every route.

const h = async () => json({});
const routes: Route[] = [
  { method: "POST", path: "/v1/echo", handler: h },
  { method: "GET", path: "/v1/items/{service}/{key+}", handler: h },
  { method: "GET", path: "/v1/items/{service}/bulk", handler: h },
  { method: "GET", path: "/v1/items/orders/bulk", handler: h },
  { method: "GET", path: "/v1/things/{id}", handler: h },
  { method: "DELETE", path: "/v1/things/list", handler: h },
  { method: "DELETE", path: "/v1/things/list", handler: async () => json({ second: true }) },
  { method: "GET", path: "/health", auth: false, handler: h },
];

function table(opts: { keys?: string[]; closing?: boolean } = {}): (method: string, path: string, headers?: Record<string, string>) => RouteDecision {
  const t = createRouteTable(routes, { auth: createAuthenticator(opts.keys ?? []), isClosing: () => opts.closing ?? false });
  return (method, path, headers = {}) => t(method, path, headers);
}

test("a route without parameters wins its own path; other methods on it reach the parameter routes", () => {
  const t = table();
  let d = t("GET", "/v1/items/orders/bulk");
  assert.equal(d.route, routes[3]);
  assert.deepEqual(d.params, {});
  assert.equal(d.reply, undefined);
  d = t("GET", "/v1/items/users/bulk");
  assert.equal(d.route, routes[2]);
  assert.deepEqual(d.params, { service: "users" });
  d = t("GET", "/v1/things/list");
  assert.equal(d.route, routes[4]);
  assert.deepEqual(d.params, { id: "list" });
  // Two routes with the same method and path: the first, as the scan picks.
  assert.equal(t("DELETE", "/v1/things/list").route, routes[5]);
  assert.equal(t("POST", "/v1/echo").route, routes[0]);
  // Not the same path: a trailing slash, a doubled slash.
  assert.equal(t("POST", "/v1/echo/").reply?.status, 404);
  assert.equal(t("DELETE", "/v1//things/list").reply?.status, 404);
});

test("405 lists every method the path has, literal and parameter routes alike", () => {
  const t = table();
  const d = t("PUT", "/v1/things/list");
  assert.equal(d.reply?.status, 405);
  assert.deepEqual(d.reply?.headers, { allow: "GET, DELETE" });
  assert.equal(t("GET", "/v1/echo").reply?.headers?.["allow"], "POST");
});

test("shutdown and x-api-key are answered for a route without parameters as for any route, with the route named", () => {
  let d = table({ closing: true })("POST", "/v1/echo");
  assert.equal(d.route, routes[0]);
  assert.equal(d.reply?.status, 503);
  const keyed = table({ keys: ["k1"] });
  d = keyed("POST", "/v1/echo");
  assert.equal(d.route, routes[0]);
  assert.equal(d.reply?.status, 401);
  d = keyed("POST", "/v1/echo", { "x-api-key": "k1" });
  assert.equal(d.route, routes[0]);
  assert.equal(d.reply, undefined);
  // A public route needs no key.
  assert.equal(keyed("GET", "/health").reply, undefined);
});

test("a path with percent-encoding is decoded, and refused when the encoding is invalid", () => {
  const t = table();
  assert.deepEqual(t("GET", "/v1/items/orders/a%2Fb/c").params, { service: "orders", key: "a/b/c" });
  assert.throws(() => t("GET", "/v1/items/orders/%E0%A4%A"), (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT && /path parameter key/.test(e.message));
  // An encoded literal segment is not the literal (as before): the parameter route takes it.
  assert.deepEqual(t("GET", "/v1/items/orders/bul%6B").params, { service: "orders", key: "bulk" });
});
