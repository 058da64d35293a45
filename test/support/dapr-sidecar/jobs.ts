import * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import type { MemoryScheduler } from "../../../src/runtime/embedded/scheduler.js";
import type { JobRecord } from "../../../src/runtime/jobs-port.js";
import type { Job } from "../../../src/gen/dapr/dapr/proto/runtime/v1/Job.js";
import type { DaprJob } from "../../../src/runtime/dapr/jobs.js";
import { appCallbackWithJobEvent, daprService } from "../../../src/runtime/dapr/protos.js";
import type { ProtoAny } from "../../../src/runtime/dapr/struct.js";
import { unaryHandler } from "./status.js";

/** One delivery of a fired job to the app, as the sidecar saw it. */
export interface JobCallback {
  name: string;
  /** "OK" or the gRPC code name the app answered. */
  code: string;
  /** Which RPC delivered it. */
  via: "OnJobEvent" | "OnJobEventAlpha1" | "none";
}

function encodeData(any: ProtoAny | null | undefined): string {
  return JSON.stringify({ type_url: any?.type_url ?? "", value: Buffer.from(any?.value ?? []).toString("base64") });
}

function decodeData(data: string): ProtoAny | undefined {
  try {
    const o = JSON.parse(data) as { type_url: string; value: string };
    return o.type_url || o.value ? { type_url: o.type_url, value: Buffer.from(o.value, "base64") } : undefined;
  } catch {
    return undefined;
  }
}

function toDaprJob(r: JobRecord): Job {
  const job: Job = { name: r.name };
  if (r.schedule) job.schedule = r.schedule;
  if (r.dueTime) job.due_time = r.dueTime;
  if (r.ttl) job.ttl = r.ttl;
  if (r.repeats) job.repeats = r.repeats;
  const data = decodeData(r.data);
  if (data) job.data = data;
  return job;
}

/** Hands one firing of a job to the app through this sidecar's app channel (rejects when it could not). */
export type JobDeliver = (name: string, data: string) => Promise<void>;

/** Where and how the sidecar calls the app. */
export interface AppChannel {
  /** "host:port" of the app's gRPC server, or undefined when not known yet. */
  address(): string | undefined;
  /** Sent as `dapr-api-token` on callbacks ($APP_API_TOKEN). */
  token(): string | undefined;
  /** Whether daprd considers the app healthy (jobs are delivered only then). */
  healthy(): boolean;
  /** Wait (bounded) for the app to turn healthy. */
  whenHealthy(timeoutMs: number): Promise<boolean>;
}

/** k8s.io/apimachinery `validation.IsDNS1123Subdomain`: at most 253 characters of dot-separated RFC 1123 labels. */
function isDns1123Subdomain(s: string): boolean {
  return s.length > 0 && s.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(s);
}

/**
 * The Scheduler's job name check (go-etcd-cron `internal/api/validator/validator.go` Validator.JobName on the full
 * `app||<namespace>||<app id>||<name>` key): strip `_`, `:`, `-` and spaces, then every `||` segment must be a DNS-1123
 * subdomain. (It lower-cases first; the gateway is stricter and refuses upper case itself, so this sidecar refuses it
 * too, as the reading of v1.18.3 says.) daprd returns the refusal INTERNAL "failed to schedule job due to:
 * rpc error: code = Unknown desc = ..." (dapr `pkg/api/universal/jobs.go` scheduleJob wraps the Scheduler's error).
 */
function jobNameError(name: string): string | undefined {
  const sanitized = `app||default||app||${name}`.replace(/[_: -]/g, "");
  for (const seg of sanitized.split("||")) {
    if (!isDns1123Subdomain(seg)) return `job name is invalid "${sanitized}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`;
  }
  return undefined;
}

/**
 * Dapr's job RPCs over the embedded scheduler (its planJob applies Dapr's rules: 6-field cron or @every/@daily,
 * due_time/ttl formats, repeats and ttl need a schedule), plus the app channel: a fired job is delivered with
 * `AppCallback.OnJobEvent` (v1.18) and, when the app answers UNIMPLEMENTED, `AppCallbackAlpha.OnJobEventAlpha1`.
 */
export function jobHandlers(
  scheduler: MemoryScheduler,
  app: AppChannel,
  token: () => string | undefined,
  running: () => boolean,
  schedulerConfigured = true,
  attach: (deliver: JobDeliver) => () => void = (deliver) => {
    scheduler.setHandler(deliver);
    return () => undefined;
  },
): { handlers: grpc.UntypedServiceImplementation; callbacks: JobCallback[]; close(): void } {
  const callbacks: JobCallback[] = [];
  let clients: { address: string; v18: grpc.Client; alpha: grpc.Client } | undefined;
  const clientsFor = (address: string) => {
    if (clients?.address === address) return clients;
    clients?.v18.close();
    clients?.alpha.close();
    const V18 = grpc.makeGenericClientConstructor(appCallbackWithJobEvent(), "AppCallback");
    const Alpha = grpc.makeGenericClientConstructor(daprService("AppCallbackAlpha"), "AppCallbackAlpha");
    const creds = grpc.credentials.createInsecure();
    // Own subchannels, like a separate daprd process (see app-channel.ts).
    const opts = { "grpc.use_local_subchannel_pool": 1 };
    return (clients = { address, v18: new V18(address, creds, opts), alpha: new Alpha(address, creds, opts) });
  };
  const invoke = (client: grpc.Client, method: string, req: object): Promise<void> =>
    new Promise((resolve, reject) => {
      const md = new grpc.Metadata();
      const t = app.token();
      if (t) md.set("dapr-api-token", t);
      (client as unknown as Record<string, Function>)[method]!.call(client, req, md, { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null) =>
        err ? reject(err) : resolve(),
      );
    });

  const detach = attach(async (name, data) => {
    const address = app.address();
    // daprd delivers jobs only while the app is healthy (pkg/runtime/runtime.go appHealthChanged ->
    // jobsManager.StartApp); the Scheduler keeps the firing until then. Held here for a bounded time.
    if (running() && !app.healthy() && !(await app.whenHealthy(10_000))) {
      callbacks.push({ name, code: "APP_UNHEALTHY", via: "none" });
      throw new GatewayError(Code.UNAVAILABLE, `cannot deliver job ${name}: the app is not healthy`);
    }
    if (!running() || !address) {
      callbacks.push({ name, code: "UNAVAILABLE", via: "none" });
      throw new GatewayError(Code.UNAVAILABLE, `cannot deliver job ${name}: ${running() ? "no app address" : "sidecar stopped"}`);
    }
    const c = clientsFor(address);
    const req = { name, data: decodeData(data) ?? null, method: `job/${name}`, content_type: "" };
    try {
      await invoke(c.v18, "OnJobEvent", req);
      callbacks.push({ name, code: "OK", via: "OnJobEvent" });
    } catch (e) {
      const err = e as grpc.ServiceError;
      if (err.code !== grpc.status.UNIMPLEMENTED) {
        callbacks.push({ name, code: grpc.status[err.code] ?? "UNKNOWN", via: "OnJobEvent" });
        throw e;
      }
      try {
        await invoke(c.alpha, "OnJobEventAlpha1", req);
        callbacks.push({ name, code: "OK", via: "OnJobEventAlpha1" });
      } catch (e2) {
        callbacks.push({ name, code: grpc.status[(e2 as grpc.ServiceError).code] ?? "UNKNOWN", via: "OnJobEventAlpha1" });
        throw e2;
      }
    }
  });

  // No Scheduler: pkg/runtime/scheduler/internal/clients/clients.go Next fails "scheduler clients are disabled",
  // which the jobs API returns INTERNAL.
  const h = (fn: (req: any) => Promise<object>) =>
    unaryHandler(token, async (req) => {
      if (!schedulerConfigured) throw new GatewayError(Code.INTERNAL, "failed to schedule job due to: scheduler clients are disabled");
      return fn(req);
    });
  return {
    callbacks,
    close() {
      detach();
      clients?.v18.close();
      clients?.alpha.close();
      clients = undefined;
    },
    handlers: {
      ScheduleJobAlpha1: h(async (req: { job?: DaprJob | null; overwrite: boolean }) => {
        const job = req.job;
        if (!job) throw new GatewayError(Code.INVALID_ARGUMENT, "job is required");
        if (!job.name) throw new GatewayError(Code.INVALID_ARGUMENT, "job name is required");
        const badName = jobNameError(job.name);
        if (badName) throw new GatewayError(Code.INTERNAL, `failed to schedule job due to: rpc error: code = Unknown desc = ${badName}`);
        await scheduler.schedule(
          {
            name: job.name,
            ...(job.schedule ? { schedule: job.schedule } : {}),
            ...(job.due_time ? { dueTime: job.due_time } : {}),
            ...(job.ttl ? { ttl: job.ttl } : {}),
            ...(job.repeats ? { repeats: Number(job.repeats) } : {}),
            data: encodeData(job.data),
          },
          undefined,
          { overwrite: req.overwrite },
        );
        return {};
      }),
      GetJobAlpha1: h(async (req: { name: string }) => {
        const r = await scheduler.get(req.name);
        if (!r) throw new GatewayError(Code.INTERNAL, `failed to get job due to: job not found: ${req.name}`);
        return { job: toDaprJob(r) };
      }),
      DeleteJobAlpha1: h(async (req: { name: string }) => {
        if (!req.name) throw new GatewayError(Code.INVALID_ARGUMENT, "job name is required");
        try {
          await scheduler.delete(req.name);
        } catch (e) {
          // daprd's delete is idempotent: a missing job is not an error.
          if (GatewayError.from(e).code !== Code.NOT_FOUND) throw e;
        }
        return {};
      }),
      ListJobsAlpha1: h(async () => ({ jobs: (await scheduler.list()).map(toDaprJob) })),
    },
  };
}
