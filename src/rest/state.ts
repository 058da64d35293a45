import { Code, httpStatusOf } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import type { StoredItem } from "../runtime/state-port.js";
import type { StateOps } from "../ops/state.js";
import { deleteBulkMessage } from "../ops/state-status.js";
import { inBandOk } from "../shared/status.js";
import { errorBody, json, type RestReply, type RestRequest, type Route } from "../http/router.js";
import { createReplyBuildBudget, jsonItemsBody } from "./json-items.js";
import { booleanParam } from "../http/query-params.js";
import { deleteBodyFromJson, saveStateFromJson } from "./state-body.js";
import { echo } from "../shared/echo.js";
import { traceOfHeaders } from "../ops/forward-metadata.js";
import { httpServerSpan, type ServerSpanInfo } from "../observe/span.js";

const toItem = (i: StoredItem) => ({ key: i.key, value: i.value, etag: i.etag });

const SAVE = httpServerSpan("POST", "/v1/state/save-state");
const QUERY = httpServerSpan("GET", "/v1/state/{service}/query");
const GET_BULK = httpServerSpan("GET", "/v1/state/{service}/bulk");
const DELETE_BULK = httpServerSpan("DELETE", "/v1/state/{service}/bulk");
const GET = httpServerSpan("GET", "/v1/state/{service}/{key+}");
const DELETE = httpServerSpan("DELETE", "/v1/state/{service}/{key+}");

/** A query parameter by snake_case name, camelCase accepted. */
function param(req: RestRequest, name: string): string | null {
  return req.query.get(name) ?? req.query.get(name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()));
}

/** An optional boolean query parameter (snake_case or camelCase), by the REST front's one rule. */
function boolParam(req: RestRequest, name: string): boolean {
  return booleanParam(name, param(req, name));
}

function intParam(req: RestRequest, name: string): number {
  const v = param(req, name);
  if (v === null || v === "") return 0;
  if (!/^\d{1,9}$/.test(v)) throw invalidArgument(`query parameter ${name}`, `must be a non-negative integer, got '${echo(v)}'`);
  return Number(v);
}

/** Repeated `keys` parameters; a comma is part of a key, not a separator. */
function keysParam(req: RestRequest): string[] {
  const keys = req.query.getAll("keys");
  if (keys.length === 0) throw invalidArgument("query parameter keys", "is required: repeat it once per key (?keys=a&keys=b)");
  keys.forEach((k, i) => {
    if (k === "") throw invalidArgument(`query parameter keys[${i}]`, "must not be empty");
  });
  return keys;
}

/** The optional JSON body of a DELETE (`{change}`). */
function deleteBody(req: RestRequest): ReturnType<typeof deleteBodyFromJson> {
  return req.body.length === 0 ? {} : deleteBodyFromJson(req.json());
}

/**
 * `/v1/state/...` routes (docs/state.md "REST"): thin wrappers over the shared State operations. Query and bulk get
 * replies are built within `maxBuildBytes` at once (json-items.ts); past it they are 503 with `retry-after: 1`, as
 * the HTTP thread's unread-reply bound answers.
 */
export function stateRoutes(ops: StateOps, maxBuildBytes: number): Route[] {
  const budget = createReplyBuildBudget(maxBuildBytes);
  const items = async (list: readonly StoredItem[], token: string | undefined, req: RestRequest): Promise<RestReply> => {
    try {
      return { raw: await jsonItemsBody(list, token, req.signal, budget), rawOwned: true };
    } catch (e) {
      if (!(e instanceof GatewayError) || e.code !== Code.UNAVAILABLE) throw e;
      return { status: httpStatusOf(e.code), headers: { "retry-after": "1" }, body: errorBody(e) };
    }
  };
  const trace = (req: RestRequest, span: ServerSpanInfo) => traceOfHeaders(ops.tracing, req.headers, span);
  return [
    {
      method: "POST",
      path: "/v1/state/save-state",
      handler: async (req) => {
        const { etag } = await ops.save(saveStateFromJson(req.json()), req.signal, trace(req, SAVE));
        return json({ status: inBandOk(), etag });
      },
    },
    {
      method: "GET",
      path: "/v1/state/{service}/query",
      handler: async (req) => {
        const r = await ops.query({ service: req.params["service"]!, query: param(req, "query") ?? "", limit: intParam(req, "limit") }, req.signal, trace(req, QUERY));
        return items(r.items, r.token, req);
      },
    },
    {
      method: "GET",
      path: "/v1/state/{service}/bulk",
      handler: async (req) => items(await ops.getBulk(req.params["service"]!, keysParam(req), req.signal, trace(req, GET_BULK)), undefined, req),
    },
    {
      method: "DELETE",
      path: "/v1/state/{service}/bulk",
      handler: async (req) => {
        const r = await ops.deleteBulk(
          { service: req.params["service"]!, keys: keysParam(req), publish_change: boolParam(req, "publish_change"), ...deleteBody(req) },
          req.signal,
          trace(req, DELETE_BULK),
        );
        return json({ status: inBandOk(deleteBulkMessage(r)) });
      },
    },
    {
      method: "GET",
      path: "/v1/state/{service}/{key+}",
      handler: async (req) => {
        const service = req.params["service"]!;
        const key = req.params["key"]!;
        const item = await ops.get(service, key, req.signal, trace(req, GET));
        if (!item) throw new GatewayError(Code.NOT_FOUND, `key ${echo(key)} is not stored for service ${echo(service)}`);
        return json(toItem(item));
      },
    },
    {
      method: "DELETE",
      path: "/v1/state/{service}/{key+}",
      handler: async (req) => {
        await ops.delete(
          {
            service: req.params["service"]!,
            key: req.params["key"]!,
            etag: param(req, "etag") ?? "",
            include_value: boolParam(req, "include_value"),
            publish_change: boolParam(req, "publish_change"),
            ...deleteBody(req),
          },
          req.signal,
          trace(req, DELETE),
        );
        return json({ status: inBandOk() });
      },
    },
  ];
}
