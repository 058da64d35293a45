import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import type { QueryResult, StatePort, StoredItem } from "../runtime/state-port.js";
import { endWith, type TraceIncoming, type TraceSpan } from "../observe/span.js";
import { parseQueryJson, queryOf } from "../runtime/embedded/query/index.js";
import { validatePublish } from "./cloudevent-validate.js";
import type { GatewayContext } from "./context.js";
import { boundQueryPage, checkBulkReply } from "./reply-bound.js";
import { createChangeNotifier, tierOf, type ChangeAction, type ChangeNotice, type ChangeNotifier } from "./state-notify.js";
import type { ChangeInput, DeleteBulkResult, DeleteBulkStateInput, DeleteStateInput, QueryStateInput, SaveStateInput } from "./state-types.js";
import { echo } from "../shared/echo.js";
import { createPageTokens } from "./page-token.js";

export type * from "./state-types.js";

/**
 * The State operations (docs/state.md), shared by the gRPC and REST front ends. Each validates its input (an
 * INVALID_ARGUMENT naming the field, before anything is written), maps the service to its state store, calls the
 * runtime's state port and, after a successful write with `publish_change`, publishes the change notification.
 */
export interface StateOps {
  /** Save a value; returns the new etag. ABORTED when `etag` is given and does not match. */
  save(req: SaveStateInput, signal?: AbortSignal, trace?: TraceIncoming): Promise<{ etag: string }>;
  /** The stored item, or undefined when the key is not stored. */
  get(service: string, key: string, signal?: AbortSignal, trace?: TraceIncoming): Promise<StoredItem | undefined>;
  /** Delete a key (missing keys succeed unless an etag is given). */
  delete(req: DeleteStateInput, signal?: AbortSignal, trace?: TraceIncoming): Promise<void>;
  /** Items of the keys that are stored, in request order (duplicates once). */
  getBulk(service: string, keys: readonly string[], signal?: AbortSignal, trace?: TraceIncoming): Promise<StoredItem[]>;
  /** Delete keys; reports which of them were stored. */
  deleteBulk(req: DeleteBulkStateInput, signal?: AbortSignal, trace?: TraceIncoming): Promise<DeleteBulkResult>;
  /** Run the query DSL against the service's store. */
  query(req: QueryStateInput, signal?: AbortSignal, trace?: TraceIncoming): Promise<QueryResult>;
  /** Whether state operations are traced: the fronts hand them a TraceIncoming (`trace`) only then. */
  readonly tracing: boolean;
}

type UntracedStateOps = Omit<StateOps, "tracing">;

/**
 * The state port with a client span per runtime call under `span` ("state.get <store>"; database conventions: the
 * runtime as `db.system.name`, the operation, the store as `db.namespace`). Made only for a traced call.
 */
function tracedPort(port: StatePort, span: TraceSpan, system: string): StatePort {
  const call = <R>(op: string, store: string, run: () => Promise<R>): Promise<R> => {
    const child = span.child(`state.${op} ${store}`, "client", { "db.system.name": system, "db.operation.name": op, "db.namespace": store });
    return endWith(child, run());
  };
  return {
    get: (store, key, signal) => call("get", store, () => port.get(store, key, signal)),
    getBulk: (store, keys, signal) => call("getBulk", store, () => port.getBulk(store, keys, signal)),
    save: (store, key, value, opts) => call("save", store, () => port.save(store, key, value, opts)),
    delete: (store, key, opts) => call("delete", store, () => port.delete(store, key, opts)),
    deleteBulk: (store, keys, signal) => call("deleteBulk", store, () => port.deleteBulk(store, keys, signal)),
    query: (store, query, limit, signal) => call("query", store, () => port.query(store, query, limit, signal)),
  };
}

/** A required, non-empty string field. */
export function requireString(value: unknown, field: string): string {
  if (value === undefined || value === null || value === "") throw invalidArgument(field, "is required and must not be empty");
  if (typeof value !== "string") throw invalidArgument(field, `must be a string, got ${typeof value}`);
  return value;
}

function requireKeys(keys: unknown, field = "keys"): string[] {
  if (!Array.isArray(keys) || keys.length === 0) throw invalidArgument(field, "is required: give at least one key");
  const seen = new Set<string>();
  keys.forEach((k, i) => seen.add(requireString(k, `${field}[${i}]`)));
  return [...seen];
}

/**
 * Check a Tier 1 notification before the write, so a bad one changes nothing: its topic and event are published as
 * they are (state-notify.ts), so they pass the publish op's own check (validatePublish: topic length, source, spec
 * version, attribute names), with the fields named under `change`. Tier 0 publishes the gateway's own event.
 */
function checkChange(change: ChangeInput | null | undefined, publish: boolean | undefined): void {
  if (!publish || tierOf(change) !== "tier1") return;
  validatePublish(change!.topic, change!.cloudevent, "change");
}

/** The notification of a single-key write; `value` goes into the Tier 0 payload when given (include_value). */
function keyNotice(req: SaveStateInput | DeleteStateInput, action: ChangeAction, key: string, value: string | undefined): ChangeNotice {
  return {
    service: req.service,
    action,
    change: req.change,
    subject: { key },
    payload: () => ({ service: req.service, key, action, ...(value !== undefined ? { value } : {}) }),
  };
}

/** Create the State operations of a gateway. */
export function createStateOps(ctx: GatewayContext, notifier: ChangeNotifier = createChangeNotifier(ctx)): StateOps {
  const pageTokens = createPageTokens();
  const tracer = ctx.tracer;
  const tracing = tracer?.on === true;

  /** The state store of a service: NOT_FOUND when unregistered, INVALID_ARGUMENT when it has no state section. */
  function storeOf(service: unknown): string {
    const name = requireString(service, "service");
    const entry = ctx.services.get(name);
    if (!entry) throw new GatewayError(Code.NOT_FOUND, `service ${echo(name)} is not registered`);
    if (!entry.state?.storeName) throw new GatewayError(Code.INVALID_ARGUMENT, `service ${echo(name)} has no state store configured (no state section in its config entry)`);
    return entry.state.storeName;
  }

  const optionalEtag = (etag: unknown): string | undefined => {
    if (etag === undefined || etag === null || etag === "") return undefined;
    if (typeof etag !== "string") throw invalidArgument("etag", `must be a string, got ${typeof etag}`);
    return etag;
  };

  /** The operations over `state`: the runtime's port, or (a traced call) that port with a span per runtime call. */
  const over = (state: StatePort): UntracedStateOps => ({
    async save(req, signal) {
      const store = storeOf(req.service);
      const key = requireString(req.key, "key");
      const value = requireString(req.value, "value");
      const etag = optionalEtag(req.etag);
      checkChange(req.change, req.publish_change);
      const newEtag = await state.save(store, key, value, { ...(etag ? { etag } : {}), ...(signal ? { signal } : {}) });
      if (req.publish_change) await notifier.notify(keyNotice(req, "save", key, req.include_value ? value : undefined));
      return { etag: newEtag };
    },

    async get(service, key, signal) {
      const store = storeOf(service);
      return state.get(store, requireString(key, "key"), signal);
    },

    async delete(req, signal) {
      const store = storeOf(req.service);
      const key = requireString(req.key, "key");
      const etag = optionalEtag(req.etag);
      checkChange(req.change, req.publish_change);
      // The deleted value is only needed for a Tier 0 event with include_value.
      const wantValue = req.publish_change && req.include_value && tierOf(req.change) === "tier0";
      const before = wantValue ? await state.get(store, key, signal) : undefined;
      await state.delete(store, key, { ...(etag ? { etag } : {}), ...(signal ? { signal } : {}) });
      if (req.publish_change) await notifier.notify(keyNotice(req, "delete", key, wantValue ? (before?.value ?? "") : undefined));
    },

    async getBulk(service, keys, signal) {
      const store = storeOf(service);
      const items = await state.getBulk(store, requireKeys(keys), signal);
      checkBulkReply(items, ctx.options.maxReplyBytes);
      return items;
    },

    async deleteBulk(req, signal) {
      const store = storeOf(req.service);
      const keys = requireKeys(req.keys);
      checkChange(req.change, req.publish_change);
      // The port does not say which keys existed; read them first (a concurrent writer may race this read).
      const existing = await state.getBulk(store, keys, signal);
      await state.deleteBulk(store, keys, signal);
      const deleted = existing.map((i) => i.key);
      if (req.publish_change && deleted.length > 0) {
        await notifier.notify({
          service: req.service,
          action: "delete",
          change: req.change,
          subject: { keys: deleted },
          payload: () => ({ service: req.service, keys: deleted, action: "delete" }),
        });
      }
      return { requested: keys.length, deleted };
    },

    async query(req, signal) {
      const store = storeOf(req.service);
      if (req.query === "" || req.query === undefined || req.query === null) throw invalidArgument("query", "is required and must not be empty; use {} to match everything");
      const text = requireString(req.query, "query");
      const limit = req.limit ?? 0;
      if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) throw invalidArgument("limit", `must be a non-negative integer, got ${String(limit)}`);
      // Validate here so a malformed query gets the same answer whatever the runtime.
      // The text is parsed once: the page token is opened, the query validated and the next token sealed on that.
      const opened = pageTokens.open(store, text, parseQueryJson(text));
      const parsed = queryOf(opened.query);
      const result = await state.query(store, opened.text, limit, signal);
      // The embedded store's tokens are offsets, so a page over the reply bound can end early with a token.
      const page = boundQueryPage(result, ctx.options.maxReplyBytes, ctx.runtime.kind === "embedded" ? parsed.offset : undefined);
      return { ...page, token: opened.seal(page.token) };
    },
  });

  const plain = over(ctx.runtime.state);
  /** One traced operation: its server span, the runtime calls under it. */
  const traced = <R>(trace: TraceIncoming, run: (ops: UntracedStateOps) => Promise<R>): Promise<R> => {
    const span = tracer!.start(trace);
    // The operations are async: a bad input rejects, and the span ends with its code.
    return endWith(span, run(over(tracedPort(ctx.runtime.state, span, ctx.runtime.kind))));
  };
  // Tracing off: the fronts hand no trace context, and this check is all a state operation pays for tracing.
  return {
    tracing,
    save: (req, signal, trace) => (trace && tracing ? traced(trace, (o) => o.save(req, signal)) : plain.save(req, signal)),
    get: (service, key, signal, trace) => (trace && tracing ? traced(trace, (o) => o.get(service, key, signal)) : plain.get(service, key, signal)),
    delete: (req, signal, trace) => (trace && tracing ? traced(trace, (o) => o.delete(req, signal)) : plain.delete(req, signal)),
    getBulk: (service, keys, signal, trace) => (trace && tracing ? traced(trace, (o) => o.getBulk(service, keys, signal)) : plain.getBulk(service, keys, signal)),
    deleteBulk: (req, signal, trace) => (trace && tracing ? traced(trace, (o) => o.deleteBulk(req, signal)) : plain.deleteBulk(req, signal)),
    query: (req, signal, trace) => (trace && tracing ? traced(trace, (o) => o.query(req, signal)) : plain.query(req, signal)),
  };
}
