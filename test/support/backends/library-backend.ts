import * as grpc from "@grpc/grpc-js";
import { create, createFileRegistry, fromBinary, toBinary, toJson, fromJson, type DescMessage, type FileRegistry, type JsonValue } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { addGrpcJsReflectionService } from "../grpc-js-reflection.js";
import { encodedFileDescriptorProtos, LIBRARY_PROTO } from "../protos/descriptors.js";

/** One request the backend decoded, as proto3 JSON (original field names), in arrival order. */
export interface LibraryCall {
  /** Short method name, e.g. "GetBook". */
  method: string;
  request: Record<string, JsonValue>;
  /** Metadata the backend received (strings only). */
  metadata: Record<string, string>;
}

/** Options of a library backend. */
export interface LibraryBackendOptions {
  /**
   * The encoded FileDescriptorProtos to serve over reflection and to decode with (default: library/v1/library.proto
   * as built). A test changes an annotation by serving edited descriptors from a restarted backend.
   */
  files?: Uint8Array[];
  /** Port; default 0 (ephemeral). */
  port?: number;
}

/** A running library backend (grpc-js, no generated stubs). */
export interface LibraryBackend {
  /** "127.0.0.1:port" */
  readonly address: string;
  readonly port: number;
  /** Requests decoded so far (bounded to the last 1,000). */
  readonly calls: LibraryCall[];
  /** Streams the backend saw cancelled. */
  readonly cancelled: string[];
  /** Stop serving. */
  close(): void;
}

const identity = (b: Buffer): Buffer => b;
const SERVICES = ["library.v1.Messaging", "library.v1.Library"];

/**
 * The annotated backend for the transcoding tests: library.v1.Messaging and library.v1.Library from
 * test/support/protos/library/v1/library.proto, served with reflection. Every request is recorded as proto3 JSON
 * (`calls`), so a test can assert what the gateway made of an HTTP request. Behaviour:
 * - Messaging answers a Message built from the request (GetMessage: `message_id` is the name's last segment;
 *   GetMessageById: `revision` and `subfield` from the request; updates echo what they got).
 * - Library keeps books in memory by name: CreateBook (`name` = parent + "/books/" + request_id, or a counter),
 *   GetBook / DeleteBook (NOT_FOUND naming it when absent), UpdateBook / ReplaceBook (NOT_FOUND when absent),
 *   ArchiveBook, ListBooks and ListTitles (the books under `parent`), WatchBooks (one message per book, then the end;
 *   `page_token: "forever"` streams a book every 20 ms until cancelled), GetFile (`size` = the path's length),
 *   PurgeShelf. A name ending in "/fail-<CODE>" fails every Library call with that gRPC code.
 */
export async function startLibraryBackend(opts: LibraryBackendOptions = {}): Promise<LibraryBackend> {
  const files = opts.files ?? encodedFileDescriptorProtos(LIBRARY_PROTO);
  const registry: FileRegistry = createFileRegistry(create(FileDescriptorSetSchema, { file: files.map((f) => fromBinary(FileDescriptorProtoSchema, f)) }));
  const msg = (name: string): DescMessage => {
    const m = registry.getMessage(name);
    if (!m) throw new Error(`no message ${name} in the served files`);
    return m;
  };
  const calls: LibraryCall[] = [];
  const cancelled: string[] = [];
  const books = new Map<string, Record<string, JsonValue>>();
  let counter = 0;

  const decode = (name: string, bytes: Buffer): Record<string, JsonValue> =>
    toJson(msg(name), fromBinary(msg(name), bytes), { useProtoFieldName: true, registry }) as Record<string, JsonValue>;
  const encode = (name: string, json: JsonValue): Buffer => Buffer.from(toBinary(msg(name), fromJson(msg(name), json, { registry })));
  const fail = (code: grpc.status, details: string): Partial<grpc.StatusObject> => ({ code, details });
  const failIfAsked = (name: unknown): void => {
    const m = typeof name === "string" ? /\/fail-([A-Z_]+)$/.exec(name) : null;
    if (m && m[1]! in grpc.status) throw fail(grpc.status[m[1] as keyof typeof grpc.status], `failed as asked by ${name}`);
  };

  type Handler = (req: Record<string, JsonValue>) => JsonValue;
  const unary = (service: string, name: string, input: string, output: string, fn: Handler) => ({
    def: { path: `/${service}/${name}`, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
    impl: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      try {
        const req = decode(input, call.request);
        record(name, req, call.metadata);
        cb(null, encode(output, fn(req)));
      } catch (e) {
        cb(e as Partial<grpc.StatusObject>);
      }
    },
  });
  const record = (method: string, request: Record<string, JsonValue>, md: grpc.Metadata): void => {
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(md.getMap())) if (typeof v === "string") metadata[k] = v;
    calls.push({ method, request, metadata });
    if (calls.length > 1_000) calls.shift();
  };
  const under = (parent: unknown): Array<Record<string, JsonValue>> => [...books.values()].filter((b) => String(b["name"]).startsWith(`${String(parent)}/books/`));
  const existing = (name: unknown): Record<string, JsonValue> => {
    failIfAsked(name);
    const b = books.get(String(name));
    if (!b) throw fail(grpc.status.NOT_FOUND, `book ${String(name)} not found`);
    return b;
  };

  const M = "library.v1.Messaging";
  const L = "library.v1.Library";
  const lastSegment = (name: unknown): string => String(name ?? "").split("/").pop() ?? "";
  const methods = [
    unary(M, "GetMessage", "library.v1.GetMessageRequest", "library.v1.Message", (r) => ({ name: r["name"] ?? "", message_id: lastSegment(r["name"]), text: `message ${String(r["name"] ?? "")}` })),
    unary(M, "GetMessageById", "library.v1.GetMessageByIdRequest", "library.v1.Message", (r) => ({
      message_id: r["message_id"] ?? "",
      revision: r["revision"] ?? "0",
      subfield: (r["sub"] as Record<string, JsonValue> | undefined)?.["subfield"] ?? "",
    })),
    unary(M, "UpdateMessage", "library.v1.UpdateMessageRequest", "library.v1.Message", (r) => ({ ...((r["message"] as Record<string, JsonValue> | undefined) ?? {}), message_id: r["message_id"] ?? "" })),
    unary(M, "UpdateMessageFields", "library.v1.Message", "library.v1.Message", (r) => r),
    unary(M, "GetUserMessage", "library.v1.GetUserMessageRequest", "library.v1.Message", (r) => ({ message_id: r["message_id"] ?? "", user_id: r["user_id"] ?? "" })),
    unary(L, "ListBooks", "library.v1.ListBooksRequest", "library.v1.ListBooksResponse", (r) => {
      failIfAsked(r["parent"]);
      return { books: under(r["parent"]) };
    }),
    unary(L, "GetBook", "library.v1.GetBookRequest", "library.v1.Book", (r) => existing(r["name"])),
    unary(L, "CreateBook", "library.v1.CreateBookRequest", "library.v1.Book", (r) => {
      failIfAsked(r["parent"]);
      const name = `${String(r["parent"] ?? "")}/books/${String(r["request_id"] || `b${++counter}`)}`;
      const book = { ...((r["book"] as Record<string, JsonValue> | undefined) ?? {}), name };
      books.set(name, book);
      return book;
    }),
    unary(L, "UpdateBook", "library.v1.UpdateBookRequest", "library.v1.Book", (r) => {
      const given = (r["book"] as Record<string, JsonValue> | undefined) ?? {};
      const book = { ...existing(given["name"]), ...given };
      books.set(String(given["name"]), book);
      return book;
    }),
    unary(L, "ReplaceBook", "library.v1.UpdateBookRequest", "library.v1.Book", (r) => {
      const given = (r["book"] as Record<string, JsonValue> | undefined) ?? {};
      existing(given["name"]);
      books.set(String(given["name"]), given);
      return given;
    }),
    unary(L, "DeleteBook", "library.v1.DeleteBookRequest", "google.protobuf.Empty", (r) => {
      existing(r["name"]);
      books.delete(String(r["name"]));
      return {};
    }),
    unary(L, "ArchiveBook", "library.v1.ArchiveBookRequest", "library.v1.Book", (r) => {
      const book = { ...existing(r["name"]), archived: true };
      books.set(String(r["name"]), book);
      return book;
    }),
    unary(L, "ListTitles", "library.v1.ListTitlesRequest", "library.v1.ListTitlesResponse", (r) => {
      failIfAsked(r["parent"]);
      const titles = under(r["parent"]).map((b) => b["title"] ?? "");
      return { titles, count: titles.length };
    }),
    unary(L, "GetFile", "library.v1.GetFileRequest", "library.v1.File", (r) => ({ path: r["path"] ?? "", size: String(String(r["path"] ?? "").length) })),
    unary(L, "PurgeShelf", "library.v1.PurgeShelfRequest", "google.protobuf.Empty", (r) => {
      failIfAsked(r["name"]);
      return {};
    }),
    unary(L, "Unannotated", "library.v1.GetBookRequest", "library.v1.Book", (r) => existing(r["name"])),
  ];
  const watch = {
    def: { path: `/${L}/WatchBooks`, requestStream: false, responseStream: true, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
    impl: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      const r = decode("library.v1.ListBooksRequest", call.request);
      record("WatchBooks", r, call.metadata);
      const m = typeof r["parent"] === "string" ? /\/fail-([A-Z_]+)$/.exec(r["parent"]) : null;
      if (r["page_token"] === "forever") {
        let i = 0;
        const t = setInterval(() => call.write(encode("library.v1.Book", { name: `${String(r["parent"])}/books/f${++i}` })), 20);
        call.once("cancelled", () => {
          clearInterval(t);
          cancelled.push(`WatchBooks ${String(r["parent"])}`);
        });
        return;
      }
      for (const b of under(r["parent"])) call.write(encode("library.v1.Book", b));
      if (m && m[1]! in grpc.status) call.emit("error", fail(grpc.status[m[1] as keyof typeof grpc.status], `failed as asked by ${String(r["parent"])}`));
      else call.end();
    },
  };

  const server = new grpc.Server();
  for (const service of SERVICES) {
    const def: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
    const impl: grpc.UntypedServiceImplementation = {};
    for (const m of [...methods, watch]) {
      if (!m.def.path.startsWith(`/${service}/`)) continue;
      const name = m.def.path.slice(service.length + 2);
      def[name] = m.def;
      impl[name] = m.impl as grpc.UntypedHandleCall;
    }
    server.addService(def, impl);
  }
  addGrpcJsReflectionService(server, { files, services: SERVICES, versions: ["v1", "v1alpha"] });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${opts.port ?? 0}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    port,
    calls,
    cancelled,
    close: () => server.forceShutdown(),
  };
}
