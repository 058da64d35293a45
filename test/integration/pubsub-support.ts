import * as grpc from "@grpc/grpc-js";
import { connect, constants as h2, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { waitFor, withKey } from "../support/gateway.js";

/** What a test sees of one Subscribe call. */
export interface Sub {
  call: grpc.ClientReadableStream<any>;
  /** Events received, in order. */
  got: any[];
  /** "headers" then one entry per event, in arrival order (to prove headers come first). */
  order: string[];
  headers: grpc.Metadata | undefined;
  status: grpc.StatusObject | undefined;
  /** The x-subscription-id response header. */
  id(): string;
  /** Resolve once the response headers arrived (the subscription is live). */
  ready(): Promise<void>;
  /** Resolve once `n` events arrived. */
  count(n: number, timeoutMs?: number): Promise<void>;
  /** Resolve with the final status. */
  ended(timeoutMs?: number): Promise<grpc.StatusObject>;
}

/** Start a Subscribe call on a generic Pubsub client. */
export function subscribe(client: grpc.Client, topics: string[], md: grpc.Metadata): Sub {
  const call = (client as unknown as { Subscribe(req: object, md: grpc.Metadata): grpc.ClientReadableStream<any> }).Subscribe({ topics }, md);
  const s: Sub = {
    call,
    got: [],
    order: [],
    headers: undefined,
    status: undefined,
    id: () => String(s.headers?.get("x-subscription-id")[0] ?? ""),
    ready: () => waitFor(() => s.headers !== undefined || s.status !== undefined, "Subscribe response headers").then(() => {
      if (!s.headers) throw new Error(`Subscribe ended before headers: ${s.status?.code} ${s.status?.details}`);
    }),
    count: (n, timeoutMs = 5000) => waitFor(() => s.got.length >= n, `${n} events (have ${s.got.length})`, timeoutMs),
    ended: (timeoutMs = 5000) => waitFor(() => s.status !== undefined, "end of the Subscribe stream", timeoutMs).then(() => s.status!),
  };
  call.on("metadata", (m) => {
    s.headers = m;
    s.order.push("headers");
  });
  call.on("data", (d) => {
    s.got.push(d);
    s.order.push("event");
  });
  call.on("status", (st) => (s.status = st));
  call.on("error", () => undefined); // the status event carries it
  return s;
}

/** Publish over gRPC; resolves the PublishResponse. */
export function publish(client: grpc.Client, topic: string, cloudevent: object | null, md: grpc.Metadata): Promise<any> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, Function>)["PublishEvent"]!.call(client, { topic, cloudevent }, md, (err: grpc.ServiceError | null, res: any) =>
      err ? reject(err) : resolve(res),
    );
  });
}

/** A minimal valid event. */
export function event(n: number | string, extra: object = {}): object {
  return { id: `e-${n}`, source: "urn:test:pubsub", type: "com.test.event", text_data: String(n), ...extra };
}

/**
 * A Subscribe call over a raw HTTP/2 client with a tiny flow-control window that never reads until `resume()`:
 * the gateway's writes to it stall, as they would for a consumer that stopped reading.
 */
export interface StalledSub {
  session: ClientHttp2Session;
  stream: ClientHttp2Stream;
  headers: Record<string, unknown> | undefined;
  /** Start reading; resolves the trailers (grpc-status, grpc-message) and the bytes received. */
  resume(timeoutMs?: number): Promise<{ trailers: Record<string, unknown>; bytes: number }>;
  close(): void;
}

/** Open a stalled raw HTTP/2 Subscribe on `address` (host:port), with extra request `headers` (metadata). */
export async function stalledSubscribe(address: string, topics: string[], apiKey: string, headers: Record<string, string> = {}): Promise<StalledSub> {
  const session = connect(`http://${address}`, { settings: { initialWindowSize: 256 } });
  session.on("error", () => undefined);
  const def = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as unknown as Record<string, { requestSerialize(v: object): Buffer }>;
  const msg = def["Subscribe"]!.requestSerialize({ topics });
  const frame = Buffer.alloc(5 + msg.length);
  frame.writeUInt32BE(msg.length, 1);
  msg.copy(frame, 5);
  const stream = session.request({
    [h2.HTTP2_HEADER_METHOD]: "POST",
    [h2.HTTP2_HEADER_PATH]: "/io.cloudevents.v1.Pubsub/Subscribe",
    "content-type": "application/grpc",
    te: "trailers",
    "x-api-key": apiKey,
    ...headers,
  });
  stream.on("error", () => undefined);
  stream.end(frame);
  const s: StalledSub = {
    session,
    stream,
    headers: undefined,
    resume(timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        let bytes = 0;
        const t = setTimeout(() => reject(new Error("stalled subscriber: no trailers after resume")), timeoutMs);
        stream.on("data", (c: Buffer) => (bytes += c.length));
        stream.on("trailers", (trailers) => {
          clearTimeout(t);
          resolve({ trailers, bytes });
        });
        stream.resume();
      });
    },
    close() {
      // destroy, not close: a paused stream holding unread data never emits 'close', so a graceful session.close()
      // would wait for it forever and keep the connection (and the gateway's side of it) open.
      stream.destroy();
      session.destroy();
    },
  };
  stream.on("response", (h) => (s.headers = h));
  stream.pause();
  await waitFor(() => s.headers !== undefined, "stalled subscriber's response headers");
  return s;
}

/** The value of an unlabelled metric in the Prometheus text, or undefined. */
export async function metric(http: string, name: string, labels = ""): Promise<number | undefined> {
  const text = await (await fetch(`${http}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `) || (labels === "" && l.startsWith(`${name}{} `)));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

export { withKey };
