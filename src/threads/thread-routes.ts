import type { CloudEvent } from "../shared/cloudevent.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { PubsubOps } from "../ops/pubsub.js";
import type { TraceIncoming } from "../observe/span.js";
import { createRestRequest, type Route } from "../http/router.js";
import { STREAM_THRESHOLD_BYTES } from "../http/reply-writer.js";
import { ownBuffer } from "../http/free-buffer.js";
import { withTransfer, type BridgeHandler } from "./bridge.js";
import type { ReplyWire, RouteWire } from "./protocol.js";

/** Buffers back from structured clone (which gives Uint8Array), as the rest of the gateway expects bytes. */
function reviveEvent(e: CloudEvent | null | undefined): CloudEvent | null | undefined {
  if (!e || typeof e !== "object") return e;
  const buf = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  if (e.binary_data instanceof Uint8Array) e.binary_data = buf(e.binary_data);
  if (e.proto_data?.value instanceof Uint8Array) e.proto_data.value = buf(e.proto_data.value);
  for (const v of Object.values(e.attributes ?? {})) if (v?.ce_bytes instanceof Uint8Array) v.ce_bytes = buf(v.ce_bytes);
  return e;
}

/**
 * What the main thread serves for every thread over the bridge: the REST routes the threads forward (`route`: the
 * same handler as with one thread, the reply serialized once) and a WebSocket publish (`pubsub.publish`).
 */
export function forwardedHandlers(routes: readonly Route[], pubsub: PubsubOps): Record<string, BridgeHandler> {
  const byKey = new Map(routes.map((r) => [`${r.method} ${r.path}`, r]));
  return {
    route: (wire: RouteWire, signal): Promise<ReplyWire> => {
      const route = byKey.get(`${wire.method} ${wire.path}`);
      if (!route) throw new GatewayError(Code.NOT_FOUND, `no main-thread route ${wire.method} ${wire.path}`);
      const body = Buffer.from(wire.body.buffer, wire.body.byteOffset, wire.body.byteLength);
      const req = createRestRequest(wire.method, wire.url, wire.params, new URLSearchParams(wire.query), wire.headers, body, signal);
      return route.handler(req).then((reply) => {
        if (reply.stream) throw new GatewayError(Code.INTERNAL, `route ${wire.path} streams its reply and cannot be forwarded from a worker thread`);
        // A large body crosses as bytes the thread takes over (bridge.ts withTransfer), never as a copy: a state page of
        // --max-reply-bytes was copied twice on its way, and with clients slow to read, those copies piled up.
        let raw = reply.raw ?? JSON.stringify(reply.body ?? null);
        if (typeof raw === "string" && raw.length > STREAM_THRESHOLD_BYTES) raw = Buffer.from(raw);
        const owned = typeof raw !== "string" && raw.byteLength > STREAM_THRESHOLD_BYTES ? ownBuffer(raw) : undefined;
        const out: ReplyWire = { status: reply.status ?? 200, raw, contentType: reply.contentType, headers: reply.headers };
        return owned ? withTransfer(out, [owned]) : out;
      });
    },
    "pubsub.publish": (p: { topic: string; event: CloudEvent; trace?: TraceIncoming }, signal) => pubsub.publish(p.topic, reviveEvent(p.event), signal, p.trace),
  };
}
