import * as grpc from "@grpc/grpc-js";
import { create, createFileRegistry, fromBinary, fromJson, toBinary, type DescMessage, type FileRegistry, type JsonValue } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { addGrpcJsReflectionService } from "../grpc-js-reflection.js";
import { encodedFileDescriptorProtos, SHOP_PROTO } from "../protos/descriptors.js";
import { adminFileDescriptor } from "./admin-descriptor.js";

/** One call the backend received, as the backend saw it. */
export interface ReceivedCall {
  path: string;
  /** Every metadata entry (grpc-js internal keys such as user-agent included). */
  metadata: Record<string, grpc.MetadataValue>;
  /** The deadline the backend saw, epoch ms, or undefined for none. */
  deadline: number | undefined;
}

/** Options of a test backend. */
export interface OrderBackendOptions {
  /** Reflection versions served: ["v1", "v1alpha"] (rich backend), ["v1alpha"], or [] (no reflection). Default both. */
  reflection?: ReadonlyArray<"v1" | "v1alpha">;
  /** Also host ops.v1.Admin (makes `ListOrders` ambiguous). Default true. */
  admin?: boolean;
  /** Port; default 0 (ephemeral). */
  port?: number;
  /** Serve over TLS with these (grpc-js ServerCredentials.createSsl). Default: cleartext. */
  credentials?: grpc.ServerCredentials;
}

/** A running order backend (grpc-js, no generated stubs). */
export interface OrderBackend {
  /** "127.0.0.1:port" */
  readonly address: string;
  readonly port: number;
  /** Calls received so far (reflection excluded). */
  readonly received: ReceivedCall[];
  /** Reflection streams opened so far (each schema fetch opens one), by anyone. */
  readonly reflections: { count: number };
  /** Calls the backend saw cancelled (by the caller or by the deadline) while sleeping. */
  readonly cancelled: string[];
  /** The order ids of every request message UploadOrders and SyncOrders read, in arrival order. */
  readonly streamed: string[];
  /** Messages WatchOrders has written so far (its flow control: it waits for drain, so this stays bounded). */
  readonly watchWritten: { count: number };
  /** Stop serving (connections dropped). */
  stop(): void;
  /** Serve again on the same port. */
  restart(): Promise<void>;
  close(): void;
}

const identity = (b: Buffer): Buffer => b;

function registryOf(files: Uint8Array[]): FileRegistry {
  return createFileRegistry(create(FileDescriptorSetSchema, { file: files.map((f) => fromBinary(FileDescriptorProtoSchema, f)) }));
}

function method(path: string, responseStream = false, requestStream = false): grpc.MethodDefinition<Buffer, Buffer> {
  return { path, requestStream, responseStream, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity };
}

/**
 * The rich-types backend: shop.v1.OrderService from test/support/protos (every proto3 JSON feature) and
 * ops.v1.Admin. Behaviour:
 * - PutOrder echoes the request bytes unchanged (exact round trips measure only the gateway's conversion).
 * - GetOrder by `order_id`: "fail:<CODE>:<text>" fails with that code and text; "sleep:<ms>" waits (recording a
 *   cancellation) then answers; anything else answers `{orderId, attributes: <the metadata it received>}`.
 * - ListOrders answers two orders; WatchOrders streams three; Admin.Ping echoes text with a count.
 */
export async function startOrderBackend(opts: OrderBackendOptions = {}): Promise<OrderBackend> {
  const shopFiles = encodedFileDescriptorProtos(SHOP_PROTO);
  const files = opts.admin === false ? shopFiles : [...shopFiles, adminFileDescriptor()];
  const registry = registryOf(files);
  const msg = (name: string): DescMessage => registry.getMessage(name)!;
  const encode = (name: string, json: JsonValue): Buffer => Buffer.from(toBinary(msg(name), fromJson(msg(name), json, { registry })));
  const received: ReceivedCall[] = [];
  const cancelled: string[] = [];
  const streamed: string[] = [];
  let pings = 0;
  const watchWritten = { count: 0 };

  const record = (path: string, call: { metadata: grpc.Metadata; getDeadline(): grpc.Deadline }): void => {
    const d = call.getDeadline();
    const ms = d instanceof Date ? d.getTime() : d;
    received.push({ path, metadata: call.metadata.getMap(), deadline: Number.isFinite(ms) ? ms : undefined });
  };

  const unary =
    (path: string, fn: (req: Buffer, call: grpc.ServerUnaryCall<Buffer, Buffer>) => Promise<Buffer>) =>
    (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      record(path, call);
      fn(call.request, call).then(
        (res) => cb(null, res),
        (e: Partial<grpc.StatusObject>) => cb(e),
      );
    };

  const order = "/shop.v1.OrderService/";
  const orderDef: grpc.ServiceDefinition = {
    GetOrder: method(order + "GetOrder"),
    PutOrder: method(order + "PutOrder"),
    ListOrders: method(order + "ListOrders"),
    WatchOrders: method(order + "WatchOrders", true),
    UploadOrders: method(order + "UploadOrders", false, true),
    SyncOrders: method(order + "SyncOrders", true, true),
  };
  const orderImpl: grpc.UntypedServiceImplementation = {
    PutOrder: unary(order + "PutOrder", async (req) => req),
    GetOrder: unary(order + "GetOrder", async (req, call) => {
      const id = (fromBinary(msg("shop.v1.GetOrderRequest"), req) as unknown as { orderId: string }).orderId;
      const fail = /^fail:([A-Z_]+):(.*)$/s.exec(id);
      if (fail) throw { code: grpc.status[fail[1] as keyof typeof grpc.status], details: fail[2] };
      const sleep = /^sleep:(\d+)$/.exec(id);
      if (sleep) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Number(sleep[1]));
          call.once("cancelled", () => {
            clearTimeout(t);
            cancelled.push(id);
            resolve();
          });
        });
        return encode("shop.v1.Order", { orderId: id });
      }
      const md: Record<string, string> = {};
      for (const [k, v] of Object.entries(call.metadata.getMap())) if (typeof v === "string") md[k] = v;
      return encode("shop.v1.Order", { orderId: id, attributes: md });
    }),
    ListOrders: unary(order + "ListOrders", async () => encode("shop.v1.ListOrdersResponse", { orders: [{ orderId: "a" }, { orderId: "b" }] })),
    WatchOrders: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      record(order + "WatchOrders", call);
      const id = (fromBinary(msg("shop.v1.GetOrderRequest"), call.request) as unknown as { orderId: string }).orderId;
      // "count:N[:fail]" streams N orders (16 KiB each when "big:N") honouring backpressure, then ends OK (or ABORTED);
      // "forever" streams one order every 10 ms until cancelled; anything else streams w1, w2, w3.
      const m = /^(count|big):(\d+)(:fail)?$/.exec(id);
      if (id === "forever") {
        let i = 0;
        const t = setInterval(() => call.write(encode("shop.v1.Order", { orderId: `f${++i}` })), 10);
        call.once("cancelled", () => {
          clearInterval(t);
          cancelled.push(id);
        });
        return;
      }
      if (!m) {
        for (const w of ["w1", "w2", "w3"]) call.write(encode("shop.v1.Order", { orderId: w }));
        call.end();
        return;
      }
      const n = Number(m[2]);
      const note = m[1] === "big" ? "x".repeat(16 * 1024) : undefined;
      let i = 0;
      let stopped = false;
      call.once("cancelled", () => {
        stopped = true;
        cancelled.push(id);
      });
      const pump = (): void => {
        while (!stopped && i < n) {
          i++;
          watchWritten.count++;
          const ok = call.write(encode("shop.v1.Order", { orderId: `o${i}`, ...(note ? { pickupStore: note } : {}) }));
          if (!ok) return void call.once("drain", pump);
        }
        if (stopped) return;
        if (m[3]) call.emit("error", { code: grpc.status.ABORTED, details: `failed after ${n} orders` });
        else call.end();
      };
      pump();
    },
    // Collects every order; an order id "fail:<CODE>:<text>" fails the call with it. Answers the orders in order.
    UploadOrders: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      record(order + "UploadOrders", call);
      const ids: string[] = [];
      let failed = false;
      call.once("cancelled", () => cancelled.push("upload"));
      call.on("data", (b: Buffer) => {
        const id = (fromBinary(msg("shop.v1.Order"), b) as unknown as { orderId: string }).orderId;
        streamed.push(id);
        const fail = /^fail:([A-Z_]+):(.*)$/s.exec(id);
        if (fail && !failed) {
          failed = true;
          cb({ code: grpc.status[fail[1] as keyof typeof grpc.status], details: fail[2] });
        }
        ids.push(id);
      });
      call.on("end", () => failed || cb(null, encode("shop.v1.ListOrdersResponse", { orders: ids.map((orderId) => ({ orderId })) })));
    },
    // Echoes each order as "echo:<id>"; "fail:<CODE>:<text>" fails the call mid-stream; "end" ends it OK early.
    SyncOrders: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      record(order + "SyncOrders", call);
      let done = false;
      call.once("cancelled", () => {
        done = true;
        cancelled.push("sync");
      });
      call.on("data", (b: Buffer) => {
        const id = (fromBinary(msg("shop.v1.Order"), b) as unknown as { orderId: string }).orderId;
        streamed.push(id);
        if (done) return;
        const fail = /^fail:([A-Z_]+):(.*)$/s.exec(id);
        if (fail) {
          done = true;
          call.emit("error", { code: grpc.status[fail[1] as keyof typeof grpc.status], details: fail[2] });
          return;
        }
        if (id === "end") {
          done = true;
          call.end();
          return;
        }
        call.write(encode("shop.v1.Order", { orderId: `echo:${id}` }));
      });
      call.on("end", () => done || call.end());
    },
  };
  const admin = "/ops.v1.Admin/";
  const adminDef: grpc.ServiceDefinition = { ListOrders: method(admin + "ListOrders"), Ping: method(admin + "Ping") };
  const adminImpl: grpc.UntypedServiceImplementation = {
    ListOrders: unary(admin + "ListOrders", async () => Buffer.alloc(0)),
    Ping: unary(admin + "Ping", async (req) => {
      const text = (fromBinary(msg("ops.v1.PingRequest"), req) as unknown as { text: string }).text;
      return encode("ops.v1.PingReply", { text, count: String(++pings) });
    }),
  };

  let server: grpc.Server | undefined;
  const reflections = { count: 0 };
  const serve = async (port: number): Promise<number> => {
    const s = new grpc.Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024 });
    s.addService(orderDef, orderImpl);
    const services = ["shop.v1.OrderService"];
    if (opts.admin !== false) {
      s.addService(adminDef, adminImpl);
      services.push("ops.v1.Admin");
    }
    const versions = opts.reflection ?? ["v1", "v1alpha"];
    if (versions.length > 0) addGrpcJsReflectionService(s, { files, services, versions, onStream: () => reflections.count++ });
    const bound = await new Promise<number>((resolve, reject) =>
      s.bindAsync(`127.0.0.1:${port}`, opts.credentials ?? grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    server = s;
    return bound;
  };
  const port = await serve(opts.port ?? 0);
  return {
    address: `127.0.0.1:${port}`,
    port,
    received,
    reflections,
    cancelled,
    streamed,
    watchWritten,
    stop() {
      server?.forceShutdown();
      server = undefined;
    },
    async restart() {
      if (!server) await serve(port);
    },
    close() {
      server?.forceShutdown();
      server = undefined;
    },
  };
}
