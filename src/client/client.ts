import { toProtoCloudEvent, type CloudEventInput, type ProtoCloudEvent } from "./cloudevent.js";
import * as wire from "./convert.js";
import { GatewayClientError, GatewayInvocationError, invalidArgument, toClientError } from "./errors.js";
import { resolveClientOptions, resolveReconnectOptions, type GatewayClientOptions, type ReconnectOptions } from "./options.js";
import { ReplyRouter, type RequestOptions } from "./request-reply.js";
import { Subscription, type SubscribeOptions } from "./subscription.js";
import { createTransport, type CallOptions } from "./transport.js";
import { startClientInvokeStream, type InvokeStream, type InvokeStreamOptions } from "./invoke-stream.js";
import type {
  ConfigService,
  DeleteBulkStateInput,
  DeleteStateInput,
  InvokeResult,
  MethodInfo,
  MethodSchema,
  OperationStatus,
  QueryStateInput,
  QueryStateResult,
  SaveStateInput,
  SaveStateResult,
  ScheduleTriggerInput,
  StateItem,
  SubscriptionMessage,
  TriggerRecord,
} from "./types.js";

/** `subscribe()` options plus a per-subscription reconnect policy. */
export interface SubscriptionOptions extends SubscribeOptions {
  /** Overrides the client's reconnect policy for this subscription. */
  reconnect?: ReconnectOptions;
}

/**
 * A client of the gateway's gRPC API. Every operation returns a promise that rejects with a GatewayClientError
 * (code + message); in-band failures (`status.success == false`) reject the same way, with the reported code.
 */
export interface GatewayClient {
  /** Call `method` of backend `service` with a JSON-able payload; resolves the parsed response, rejects GatewayInvocationError. */
  invoke<T = unknown>(service: string, method: string, payload?: object, options?: CallOptions): Promise<T>;
  /** InvokeJson: the raw result (`success`, `status`, `message`, `responseData` text); a failed backend call resolves. */
  invokeJson(service: string, method: string, payload?: object | string, options?: CallOptions): Promise<InvokeResult>;
  /**
   * Any method kind, streamed (`platform.Gateway/InvokeStream`): iterate the result for the responses; for client- and
   * bidi-streaming methods `write()` more requests and `end()`. `payload` is the first request (omit it for a
   * client/bidi call that writes everything later).
   */
  invokeStream<T = unknown>(service: string, method: string, payload?: object | string, options?: InvokeStreamOptions): InvokeStream<T>;
  /** Invocable backend services. */
  listServices(options?: CallOptions): Promise<string[]>;
  /** Methods of a backend service. */
  listMethods(service: string, options?: CallOptions): Promise<MethodInfo[]>;
  /** Wire format of a method's input (default) or output message. */
  getMethodSchema(service: string, method: string, type?: "input" | "output", options?: CallOptions): Promise<MethodSchema>;
  /** Every registered service, non-dialable ones included. */
  listConfigServices(options?: CallOptions): Promise<ConfigService[]>;
  /** One registered service, or null when the name is not registered. */
  getConfigService(name: string, options?: CallOptions): Promise<ConfigService | null>;

  /** Save a value; resolves the status and the new etag. */
  saveState(input: SaveStateInput, options?: CallOptions): Promise<SaveStateResult>;
  /** The value and etag of a key. */
  getState(service: string, key: string, options?: CallOptions): Promise<StateItem>;
  /** Delete a key. */
  deleteState(input: DeleteStateInput, options?: CallOptions): Promise<OperationStatus>;
  /** Query a service's state with the runtime's query DSL. */
  queryState(input: QueryStateInput, options?: CallOptions): Promise<QueryStateResult>;
  /** Values of several keys. */
  getBulkState(service: string, keys: string[], options?: CallOptions): Promise<StateItem[]>;
  /** Delete several keys; the status message reports how many were deleted. */
  deleteBulkState(input: DeleteBulkStateInput, options?: CallOptions): Promise<OperationStatus>;

  /** Publish an event (plain object or `cloudevents` SDK CloudEvent) to a topic. */
  publish(topic: string, event: CloudEventInput, options?: CallOptions): Promise<OperationStatus>;
  /** Subscribe to topics; iterate the result, or await `ready` and use `unsubscribe()`/`close()`. */
  subscribe(topics: string | string[], options?: SubscriptionOptions): Subscription;
  /** Subscribe with a handler called for each message, one at a time (a returned promise is awaited). */
  subscribe(topics: string | string[], handler: (message: SubscriptionMessage) => unknown, options?: SubscriptionOptions): Subscription;
  /** Publish `event` with `correlationid`/`replytopic` set and resolve the matching reply from `replyTopic`. */
  request(topic: string, event: CloudEventInput, replyTopic: string, options?: RequestOptions): Promise<SubscriptionMessage>;

  /** Schedule a trigger. */
  scheduleTrigger(input: ScheduleTriggerInput, options?: CallOptions): Promise<OperationStatus>;
  /** One trigger by name. */
  getTrigger(name: string, options?: CallOptions): Promise<TriggerRecord>;
  /** Delete a trigger by name. */
  deleteTrigger(name: string, options?: CallOptions): Promise<OperationStatus>;
  /** Every trigger. */
  listTriggers(options?: CallOptions): Promise<TriggerRecord[]>;

  /** Close every subscription and the channel; pending calls reject with CANCELLED. Safe to call twice. */
  close(): void;
}

function nonEmpty(field: string, v: unknown): string {
  if (typeof v !== "string" || v === "") throw invalidArgument(field, `must be a non-empty string (got ${JSON.stringify(v)})`);
  return v;
}

function stringList(field: string, v: unknown): string[] {
  if (!Array.isArray(v) || v.some((k) => typeof k !== "string")) throw invalidArgument(field, "must be a list of strings");
  return [...(v as string[])];
}

function stringValue(v: unknown): string {
  if (typeof v !== "string") throw invalidArgument("value", `must be a string (got ${typeof v}); encode objects with JSON.stringify`);
  return v;
}

function payloadText(field: string, payload: unknown): string {
  if (payload === undefined) return "{}";
  if (typeof payload === "string") return payload;
  if (typeof payload !== "object" || payload === null) throw invalidArgument(field, "must be an object");
  return JSON.stringify(payload);
}

/** Create a client. No connection is made until the first call. Throws GatewayClientError on bad options. */
export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  const o = resolveClientOptions(options);
  const t = createTransport(o);
  const subscriptions = new Set<Subscription>();

  const openSubscription = (topics: string[], opts: SubscriptionOptions): Subscription => {
    const reconnect = opts.reconnect ? resolveReconnectOptions({ ...o.reconnect, ...opts.reconnect }) : o.reconnect;
    const sub = new Subscription(topics, { transport: t, reconnect }, opts);
    subscriptions.add(sub);
    void sub.done.then(() => subscriptions.delete(sub));
    return sub;
  };

  const publishWire = async (topic: string, event: ProtoCloudEvent, callOptions?: CallOptions): Promise<OperationStatus> => {
    const res = await t.unary("io.cloudevents.v1.Pubsub", "PublishEvent", { topic, cloudevent: event }, callOptions);
    return wire.requireSuccess(res.status, `publish to ${topic}`);
  };

  const replies = new ReplyRouter({
    subscribe: (topic, handler) => {
      const sub = openSubscription([topic], {});
      void sub.runHandler(handler);
      return sub;
    },
    publish: (topic, event, signal) => publishWire(topic, event, signal ? { signal } : {}),
  });

  const invokeRaw = async (method: "Invoke" | "InvokeJson", service: string, name: string, payload: unknown, callOptions?: CallOptions): Promise<InvokeResult> => {
    const req = { service: nonEmpty("service", service), method: nonEmpty("method", name), request_data: payloadText("payload", payload) };
    const res = await t.unary("platform.Gateway", method, req, callOptions);
    return { success: res.success, status: res.status, message: res.message, responseData: res.response_data };
  };

  return {
    async invoke<T>(service: string, method: string, payload: object = {}, callOptions?: CallOptions): Promise<T> {
      let res: InvokeResult;
      try {
        res = await invokeRaw("Invoke", service, method, payload, callOptions);
      } catch (e) {
        const err = toClientError(e);
        throw new GatewayInvocationError(String(service), String(method), err.codeName, err.rawMessage, { cause: err });
      }
      if (!res.success) throw new GatewayInvocationError(service, method, res.status || "UNKNOWN", res.message);
      if (res.responseData === "") return {} as T;
      try {
        return JSON.parse(res.responseData) as T;
      } catch (e) {
        throw new GatewayInvocationError(service, method, "INTERNAL", `the gateway returned response_data that is not JSON: ${(e as Error).message}`, { cause: e });
      }
    },
    invokeStream: (service, method, payload, streamOptions = {}) =>
      startClientInvokeStream(t, nonEmpty("service", service), nonEmpty("method", method), payload, streamOptions),
    invokeJson: (service, method, payload, callOptions) => invokeRaw("InvokeJson", service, method, payload, callOptions),
    async listServices(callOptions) {
      const res = await t.unary("platform.Gateway", "ListServices", {}, callOptions);
      return [...res.services];
    },
    async listMethods(service, callOptions) {
      const res = await t.unary("platform.Gateway", "ListMethods", { service: nonEmpty("service", service) }, callOptions);
      return res.methods.map(wire.methodInfo);
    },
    async getMethodSchema(service, method, type = "input", callOptions) {
      if (type !== "input" && type !== "output") throw invalidArgument("type", `must be "input" or "output" (got ${JSON.stringify(type)})`);
      const req = { service: nonEmpty("service", service), method: nonEmpty("method", method), type };
      return wire.methodSchema(await t.unary("platform.Gateway", "GetMethodSchema", req, callOptions));
    },
    async listConfigServices(callOptions) {
      const res = await t.unary("platform.Config", "ListServices", {}, callOptions);
      return res.services.map(wire.configService);
    },
    async getConfigService(name, callOptions) {
      try {
        const res = await t.unary("platform.Config", "GetService", { name: nonEmpty("name", name) }, callOptions);
        return res.service ? wire.configService(res.service) : null;
      } catch (e) {
        if (e instanceof GatewayClientError && e.codeName === "NOT_FOUND") return null;
        throw e;
      }
    },

    async saveState(input, callOptions) {
      const req = {
        service: nonEmpty("service", input?.service),
        key: nonEmpty("key", input.key),
        value: stringValue(input.value),
        etag: input.etag ?? "",
        publish_change: input.publishChange ?? false,
        include_value: input.includeValue ?? false,
        change: wire.changeNotification(input.change),
      };
      const res = await t.unary("platform.State", "SaveState", req, callOptions);
      return { ...wire.requireSuccess(res.status, `save ${input.service}/${input.key}`), etag: res.etag ?? "" };
    },
    async getState(service, key, callOptions) {
      const res = await t.unary("platform.State", "GetState", { service: nonEmpty("service", service), key: nonEmpty("key", key) }, callOptions);
      return wire.stateItem(res);
    },
    async deleteState(input, callOptions) {
      const req = {
        service: nonEmpty("service", input?.service),
        key: nonEmpty("key", input.key),
        etag: input.etag ?? "",
        publish_change: input.publishChange ?? false,
        include_value: input.includeValue ?? false,
        change: wire.changeNotification(input.change),
      };
      const res = await t.unary("platform.State", "DeleteState", req, callOptions);
      return wire.requireSuccess(res.status, `delete ${input.service}/${input.key}`);
    },
    async queryState(input, callOptions) {
      const query = input?.query === undefined ? "{}" : typeof input.query === "string" ? input.query : JSON.stringify(input.query);
      const limit = input.limit ?? 0;
      if (!Number.isInteger(limit) || limit < 0 || limit > 2147483647) throw invalidArgument("limit", `must be an integer >= 0 (got ${String(limit)})`);
      const res = await t.unary("platform.State", "QueryState", { service: nonEmpty("service", input.service), query, limit }, callOptions);
      return { items: res.items.map(wire.stateItem), token: res.token ?? "" };
    },
    async getBulkState(service, keys, callOptions) {
      const req = { service: nonEmpty("service", service), keys: stringList("keys", keys) };
      const res = await t.unary("platform.State", "GetBulkState", req, callOptions);
      return res.items.map(wire.stateItem);
    },
    async deleteBulkState(input, callOptions) {
      const req = {
        service: nonEmpty("service", input?.service),
        keys: stringList("keys", input.keys),
        publish_change: input.publishChange ?? false,
        change: wire.changeNotification(input.change),
      };
      const res = await t.unary("platform.State", "DeleteBulkState", req, callOptions);
      return wire.requireSuccess(res.status, `bulk delete in ${input.service}`);
    },

    async publish(topic, event, callOptions) {
      if (typeof topic !== "string") throw invalidArgument("topic", "must be a string");
      // An empty topic or a bad source is left to the gateway, so the error reads as the gateway reports it.
      return publishWire(topic, toProtoCloudEvent(event), callOptions);
    },
    subscribe(topics: string | string[], handlerOrOptions?: ((m: SubscriptionMessage) => unknown) | SubscriptionOptions, maybeOptions?: SubscriptionOptions): Subscription {
      const list = typeof topics === "string" ? [topics] : stringList("topics", topics);
      if (typeof handlerOrOptions === "function") {
        const sub = openSubscription(list, maybeOptions ?? {});
        void sub.runHandler(handlerOrOptions);
        return sub;
      }
      return openSubscription(list, handlerOrOptions ?? {});
    },
    request: (topic, event, replyTopic, requestOptions) => replies.request(topic, event, replyTopic, requestOptions),

    async scheduleTrigger(input, callOptions) {
      const req: Record<string, unknown> = {
        name: nonEmpty("name", input?.name),
        target_topic: nonEmpty("targetTopic", input.targetTopic),
        repeats: input.repeats ?? 0,
      };
      if (!Number.isInteger(req["repeats"]) || (req["repeats"] as number) < 0) throw invalidArgument("repeats", `must be an integer >= 0 (got ${String(input.repeats)})`);
      if (input.schedule !== undefined) req["schedule"] = input.schedule;
      if (input.dueTime !== undefined) req["due_time"] = input.dueTime;
      if (input.ttl !== undefined) req["ttl"] = input.ttl;
      const res = await t.unary("platform.Trigger", "ScheduleTrigger", req, callOptions);
      return wire.requireSuccess(res.status, `schedule trigger ${input.name}`);
    },
    async getTrigger(name, callOptions) {
      const res = await t.unary("platform.Trigger", "GetTrigger", { name: nonEmpty("name", name) }, callOptions);
      wire.requireSuccess(res.status, `get trigger ${name}`);
      return wire.triggerRecord(res.trigger ?? {});
    },
    async deleteTrigger(name, callOptions) {
      const res = await t.unary("platform.Trigger", "DeleteTrigger", { name: nonEmpty("name", name) }, callOptions);
      return wire.requireSuccess(res.status, `delete trigger ${name}`);
    },
    async listTriggers(callOptions) {
      const res = await t.unary("platform.Trigger", "ListTriggers", {}, callOptions);
      wire.requireSuccess(res.status, "list triggers");
      return (res.triggers ?? []).map(wire.triggerRecord);
    },

    close() {
      if (t.closed) return;
      replies.close();
      for (const s of subscriptions) s.close();
      t.close();
    },
  };
}

