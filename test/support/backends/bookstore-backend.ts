import * as grpc from "@grpc/grpc-js";
import { create, createFileRegistry, fromBinary, fromJson, toBinary, toJson, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { addGrpcJsReflectionService } from "../grpc-js-reflection.js";
import { BOOKSTORE_PROTO, encodedFileDescriptorProtos, fileDescriptorProtos } from "../protos/descriptors.js";

/** One request the backend decoded: short method name and the request as proto3 JSON (original field names). */
export interface BookstoreCall {
  method: string;
  request: Record<string, JsonValue>;
}

/** A running bookstore backend (grpc-js, no generated stubs). */
export interface BookstoreBackend {
  readonly port: number;
  /** Requests decoded so far (bounded to the last 1,000). */
  readonly calls: BookstoreCall[];
  close(): void;
}

const identity = (b: Buffer): Buffer => b;
const SERVICE = "bookstore.v1.Bookstore";

/**
 * The backend of test/support/protos/bookstore/v1/bookstore.proto (Envoy's transcoder bookstore example), served with
 * reflection; every request is recorded in `calls`. Shelves and books live in memory: CreateShelf numbers shelves
 * from 1 unless the shelf carries an id; GetShelf answers NOT_FOUND for an unknown id; GetFeaturedShelf a fixed shelf 0; CreateBook numbers books per
 * store from 1; UpdateBook merges the given fields (NOT_FOUND when absent); ListBooks streams a shelf's books;
 * DeleteBook and ShelfOptions answer Empty; GetAuthor answers a fixed author with the asked id.
 */
export async function startBookstoreBackend(): Promise<BookstoreBackend> {
  const files = encodedFileDescriptorProtos(BOOKSTORE_PROTO);
  const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: fileDescriptorProtos(BOOKSTORE_PROTO) }));
  const msg = (name: string): DescMessage => registry.getMessage(name)!;
  const calls: BookstoreCall[] = [];
  const shelves = new Map<string, Record<string, JsonValue>>();
  const books = new Map<string, Array<Record<string, JsonValue>>>();
  let shelfIds = 0;
  let bookIds = 0;
  const decode = (type: string, bytes: Buffer): Record<string, JsonValue> =>
    toJson(msg(type), fromBinary(msg(type), bytes), { useProtoFieldName: true, registry }) as Record<string, JsonValue>;
  const encode = (type: string, json: JsonValue): Buffer => Buffer.from(toBinary(msg(type), fromJson(msg(type), json, { registry })));
  const notFound = (what: string): Partial<grpc.StatusObject> => ({ code: grpc.status.NOT_FOUND, details: `${what} not found` });
  const shelfBooks = (shelf: JsonValue | undefined): Array<Record<string, JsonValue>> => books.get(String(shelf ?? "0")) ?? [];

  type Handler = (req: Record<string, JsonValue>) => JsonValue;
  const P = "bookstore.v1.";
  const unary: Array<[string, string, string, Handler]> = [
    ["ListShelves", "google.protobuf.Empty", "ListShelvesResponse", () => ({ shelves: [...shelves.values()] })],
    [
      "CreateShelf",
      "CreateShelfRequest",
      "Shelf",
      (r) => {
        const given = (r["shelf"] as Record<string, JsonValue> | undefined) ?? {};
        const shelf = { ...given, id: given["id"] ?? String(++shelfIds) };
        shelves.set(String(shelf.id), shelf);
        return shelf;
      },
    ],
    [
      "GetShelf",
      "GetShelfRequest",
      "Shelf",
      (r) => {
        const shelf = shelves.get(String(r["shelf"] ?? "0"));
        if (!shelf) throw notFound(`shelf ${String(r["shelf"] ?? "0")}`);
        return shelf;
      },
    ],
    ["GetFeaturedShelf", "google.protobuf.Empty", "Shelf", () => ({ id: "0", theme: "Featured" })],
    [
      "CreateBook",
      "CreateBookRequest",
      "Book",
      (r) => {
        const book = { ...((r["book"] as Record<string, JsonValue> | undefined) ?? {}), id: String(++bookIds) };
        books.set(String(r["shelf"] ?? "0"), [...shelfBooks(r["shelf"]), book]);
        return book;
      },
    ],
    [
      "UpdateBook",
      "UpdateBookRequest",
      "Book",
      (r) => {
        const given = (r["book"] as Record<string, JsonValue> | undefined) ?? {};
        const list = shelfBooks(r["shelf"]);
        const i = list.findIndex((b) => b["id"] === given["id"]);
        if (i < 0) throw notFound(`book ${String(given["id"] ?? "0")}`);
        list[i] = { ...list[i], ...given };
        return list[i]!;
      },
    ],
    ["DeleteBook", "DeleteBookRequest", "google.protobuf.Empty", () => ({})],
    ["ShelfOptions", "GetShelfRequest", "google.protobuf.Empty", () => ({})],
    ["GetAuthor", "GetAuthorRequest", "Author", (r) => ({ id: r["author"] ?? "0", gender: "GENDER_FEMALE", first_name: "Ursula", last_name: "Le Guin" })],
  ];
  const full = (t: string): string => (t.startsWith("google.") ? t : P + t);
  const def: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  const impl: grpc.UntypedServiceImplementation = {};
  const method = (name: string, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> => ({
    path: `/${SERVICE}/${name}`,
    requestStream: false,
    responseStream,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  });
  const record = (name: string, request: Record<string, JsonValue>): void => {
    calls.push({ method: name, request });
    if (calls.length > 1_000) calls.shift();
  };
  for (const [name, input, output, fn] of unary) {
    def[name] = method(name, false);
    impl[name] = ((call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      try {
        const req = decode(full(input), call.request);
        record(name, req);
        cb(null, encode(full(output), fn(req)));
      } catch (e) {
        cb(e as Partial<grpc.StatusObject>);
      }
    }) as grpc.UntypedHandleCall;
  }
  def["ListBooks"] = method("ListBooks", true);
  impl["ListBooks"] = ((call: grpc.ServerWritableStream<Buffer, Buffer>) => {
    const req = decode(P + "ListBooksRequest", call.request);
    record("ListBooks", req);
    for (const b of shelfBooks(req["shelf"])) call.write(encode(P + "Book", b));
    call.end();
  }) as grpc.UntypedHandleCall;

  const server = new grpc.Server();
  server.addService(def, impl);
  addGrpcJsReflectionService(server, { files, services: [SERVICE], versions: ["v1", "v1alpha"] });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, calls, close: () => server.forceShutdown() };
}
