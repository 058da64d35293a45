import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, codeName } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { protoDir } from "../shared/paths.js";

/** Server reflection protocol versions, in the order they are tried. */
export type ReflectionVersion = "v1" | "v1alpha";

/** What one reflection fetch found. */
export interface ReflectionResult {
  /** Every file the services need, dependencies (well-known types included) resolved transitively. */
  files: Uint8Array[];
  /** Every service the backend lists, reflection itself included (callers filter). */
  services: string[];
  /** The protocol version that answered. */
  version: ReflectionVersion;
}

/** Where and how to reflect. */
export interface ReflectionTarget {
  /** The registered service name, for messages. */
  service: string;
  /** "host:port", for messages. */
  address: string;
  /** A client whose channel reaches the backend. */
  client: grpc.Client;
  /** Bound on the whole fetch, ms. */
  timeoutMs: number;
}

interface ReflectionRequest {
  host?: string;
  list_services?: string;
  file_by_filename?: string;
  file_containing_symbol?: string;
}

interface ReflectionResponse {
  message_response?: string;
  list_services_response?: { service: Array<{ name: string }> };
  file_descriptor_response?: { file_descriptor_proto: Uint8Array[] };
  error_response?: { error_code: number; error_message: string };
}

type MethodDef = grpc.MethodDefinition<ReflectionRequest, ReflectionResponse>;
let methods: Record<ReflectionVersion, MethodDef> | undefined;

function methodOf(version: ReflectionVersion): MethodDef {
  methods ??= (() => {
    const load = (v: ReflectionVersion): MethodDef => {
      const pkg = loadSync(`grpc/reflection/${v}/reflection.proto`, { keepCase: true, oneofs: true, defaults: false, includeDirs: [protoDir()] });
      const svc = pkg[`grpc.reflection.${v}.ServerReflection`] as grpc.ServiceDefinition;
      return svc["ServerReflectionInfo"] as MethodDef;
    };
    return { v1: load("v1"), v1alpha: load("v1alpha") };
  })();
  return methods[version];
}

/** A reflection stream answering requests in order (servers answer each request before reading the next). */
class Session {
  private readonly call: grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse>;
  private readonly pending: Array<{ resolve(r: ReflectionResponse): void; reject(e: unknown): void }> = [];
  private failure: unknown;

  constructor(client: grpc.Client, version: ReflectionVersion, deadline: number) {
    const m = methodOf(version);
    this.call = client.makeBidiStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, new grpc.Metadata(), { deadline });
    this.call.on("data", (res: ReflectionResponse) => this.pending.shift()?.resolve(res));
    this.call.on("error", (e) => this.fail(e));
    this.call.on("end", () => this.fail(new GatewayError(Code.UNAVAILABLE, "the reflection stream ended early")));
  }

  private fail(e: unknown): void {
    this.failure ??= e;
    for (const p of this.pending.splice(0)) p.reject(e);
  }

  ask(req: ReflectionRequest): Promise<ReflectionResponse> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      this.call.write(req);
    });
  }

  close(): void {
    this.failure ??= new GatewayError(Code.CANCELLED, "reflection session closed");
    this.call.end();
    this.call.cancel();
  }
}

function filesOf(target: ReflectionTarget, res: ReflectionResponse, what: string): Uint8Array[] {
  if (res.error_response) throw backendError(target, res.error_response, what);
  const files = res.file_descriptor_response?.file_descriptor_proto;
  if (!files) throw new GatewayError(Code.INTERNAL, `service ${target.service}: reflection on ${target.address} answered ${what} with ${res.message_response ?? "nothing"}`);
  return files;
}

function backendError(target: ReflectionTarget, err: { error_code: number; error_message: string }, what: string): GatewayError {
  const code = err.error_code >= 1 && err.error_code <= 16 ? (err.error_code as Code) : Code.UNKNOWN;
  const text = err.error_message || codeName(code);
  return new GatewayError(code, `service ${target.service}: reflection on ${target.address} failed for ${what}: ${text}`);
}

/** Translate a stream failure once, where it enters. */
function streamError(target: ReflectionTarget, e: unknown): GatewayError {
  if (e instanceof GatewayError) return e;
  const se = e as Partial<grpc.ServiceError>;
  switch (se.code) {
    case grpc.status.UNAVAILABLE:
      return new GatewayError(Code.UNAVAILABLE, `service ${target.service}: backend ${target.address} is unavailable: ${se.details ?? ""}`, { cause: e });
    case grpc.status.DEADLINE_EXCEEDED:
      return new GatewayError(Code.DEADLINE_EXCEEDED, `service ${target.service}: reflection on ${target.address} did not answer within ${target.timeoutMs} ms`, { cause: e });
    default:
      return new GatewayError(
        typeof se.code === "number" ? (se.code as number as Code) : Code.UNKNOWN,
        `service ${target.service}: reflection on ${target.address} failed: ${se.details ?? (e as Error).message}`,
        { cause: e },
      );
  }
}

async function fetchWith(target: ReflectionTarget, version: ReflectionVersion): Promise<ReflectionResult> {
  const session = new Session(target.client, version, Date.now() + target.timeoutMs);
  try {
    const listed = await session.ask({ list_services: "" });
    if (listed.error_response) throw backendError(target, listed.error_response, "list_services");
    const services = (listed.list_services_response?.service ?? []).map((s) => s.name);
    const byName = new Map<string, Uint8Array>();
    const deps = new Map<string, string[]>();
    const add = (files: Uint8Array[]): void => {
      for (const bytes of files) {
        const fd = fromBinary(FileDescriptorProtoSchema, bytes);
        if (byName.has(fd.name)) continue;
        byName.set(fd.name, bytes);
        deps.set(fd.name, fd.dependency);
      }
    };
    const own = services.filter((s) => !s.startsWith("grpc.reflection."));
    // Pipelined: every request is written before the first answer is read.
    const answers = await Promise.all(own.map((s) => session.ask({ file_containing_symbol: s })));
    answers.forEach((res, i) => add(filesOf(target, res, `symbol ${own[i]}`)));
    for (;;) {
      const missing = new Set<string>();
      for (const ds of deps.values()) for (const d of ds) if (!byName.has(d)) missing.add(d);
      if (missing.size === 0) break;
      const names = [...missing];
      const more = await Promise.all(names.map((n) => session.ask({ file_by_filename: n })));
      more.forEach((res, i) => {
        add(filesOf(target, res, `file ${names[i]}`));
        if (!byName.has(names[i]!)) throw new GatewayError(Code.FAILED_PRECONDITION, `service ${target.service}: reflection on ${target.address} does not serve ${names[i]}`);
      });
    }
    return { files: [...byName.values()], services, version };
  } catch (e) {
    throw streamError(target, e);
  } finally {
    session.close();
  }
}

/**
 * Fetch every file the backend's services need over server reflection: `list_services`, then
 * `file_containing_symbol` per service, then every missing dependency by `file_by_filename`, transitively.
 * Tries `preferred` first (default v1) and falls back to v1alpha when v1 answers UNIMPLEMENTED; the result says
 * which version worked so the caller can remember it. A backend serving neither fails FAILED_PRECONDITION with
 * "service X: gRPC reflection is not enabled on host:port".
 */
export async function fetchReflection(target: ReflectionTarget, preferred: ReflectionVersion = "v1"): Promise<ReflectionResult> {
  const order: ReflectionVersion[] = preferred === "v1" ? ["v1", "v1alpha"] : ["v1alpha", "v1"];
  let last: GatewayError | undefined;
  let retried = false;
  for (let i = 0; i < order.length; i++) {
    try {
      return await fetchWith(target, order[i]!);
    } catch (e) {
      last = GatewayError.from(e);
      // A stream started on a connection that was dying (backend restarting) fails CANCELLED or UNAVAILABLE:
      // one retry on a fresh connection, then report.
      if (!retried && (last.code === Code.CANCELLED || last.code === Code.UNAVAILABLE)) {
        retried = true;
        await new Promise((r) => setTimeout(r, 25));
        i--;
        continue;
      }
      if (last.code !== Code.UNIMPLEMENTED) throw last;
    }
  }
  throw new GatewayError(Code.FAILED_PRECONDITION, `service ${target.service}: gRPC reflection is not enabled on ${target.address}`, { cause: last });
}
