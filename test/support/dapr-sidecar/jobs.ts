import * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import type { DaprJob } from "../../../src/runtime/dapr/jobs.js";
import { appCallbackWithJobEvent, daprService } from "../../../src/runtime/dapr/protos.js";
import { decodeData, SchedulerStatus, type DeliveryResult, type TestScheduler } from "./scheduler.js";
import { unaryHandler } from "./status.js";

/** One delivery of a fired job to the app, as the sidecar saw it. */
export interface JobCallback {
  name: string;
  /** "OK" or the gRPC code name the app answered ("NO_APP_CHANNEL": daprd had no app address to call). */
  code: string;
  /** Which RPC delivered it. */
  via: "OnJobEvent" | "OnJobEventAlpha1" | "none";
  /** 1 for a firing's first delivery, 2.. for the Scheduler's retries of it (failure policy). */
  attempt: number;
  /** When the delivery was made (epoch ms). */
  at: number;
}

/** Where and how the sidecar calls the app. */
export interface AppChannel {
  /** "host:port" of the app's gRPC server, or undefined when not known yet. */
  address(): string | undefined;
  /** Sent as `dapr-api-token` on callbacks ($APP_API_TOKEN). */
  token(): string | undefined;
  /** Whether daprd considers the app healthy (jobs are delivered only then). */
  healthy(): boolean;
}

/**
 * daprd's jobs API over the Scheduler (scheduler.ts) and the app channel. The API itself checks only that the job,
 * its name and a schedule or due time are there (dapr `pkg/api/universal/jobs.go` scheduleJob: INVALID_ARGUMENT
 * "Job is empty", "Name is empty", "Schedule is empty"); everything else is the Scheduler's refusal, which daprd
 * returns as "failed to schedule job due to: rpc error: code = <code> desc = <text>" with Unknown turned into INTERNAL
 * and other codes kept (ALREADY_EXISTS) (`pkg/api/errors/scheduler.go` SchedulerScheduleJob). Get, Delete and List
 * errors are always INTERNAL ("failed to get job due to: ...").
 *
 * A fired job reaches the app with `AppCallback.OnJobEvent` (v1.18) and, when the app answers UNIMPLEMENTED,
 * `AppCallbackAlpha.OnJobEventAlpha1`: `JobEventRequest {name, data, method: "job/<name>", content_type: <data's type
 * URL>, http_extension: {verb: POST}}` with the app token (dapr `pkg/channel/grpc/grpc_channel.go` sendJob). OK and
 * NotFound are done; anything else is a failure the Scheduler retries per the job's failure policy.
 */
export function jobHandlers(
  scheduler: TestScheduler,
  app: AppChannel,
  token: () => string | undefined,
  running: () => boolean,
  schedulerConfigured = true,
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

  /** One delivery through this daprd's app channel (dapr `pkg/runtime/scheduler/internal/cluster/streamer.go` invokeApp). */
  const deliver = async (name: string, data: string, attempt: number): Promise<DeliveryResult> => {
    const record = (code: string, via: JobCallback["via"]): void => void callbacks.push({ name, code, via, attempt, at: Date.now() });
    const address = app.address();
    if (!address) {
      // "received job, but app channel not initialized": FAILED.
      record("NO_APP_CHANNEL", "none");
      return "failed";
    }
    const c = clientsFor(address);
    const any = decodeData(data);
    const req = { name, data: any ?? null, method: `job/${name}`, content_type: any?.type_url ?? "", http_extension: { verb: "POST" } };
    let code: number;
    let via: JobCallback["via"] = "OnJobEvent";
    try {
      await invoke(c.v18, "OnJobEvent", req);
      code = grpc.status.OK;
    } catch (e) {
      code = (e as grpc.ServiceError).code ?? grpc.status.UNKNOWN;
      if (code === grpc.status.UNIMPLEMENTED) {
        via = "OnJobEventAlpha1";
        try {
          await invoke(c.alpha, "OnJobEventAlpha1", req);
          code = grpc.status.OK;
        } catch (e2) {
          code = (e2 as grpc.ServiceError).code ?? grpc.status.UNKNOWN;
        }
      }
    }
    record(code === grpc.status.OK ? "OK" : (grpc.status[code] ?? "UNKNOWN"), via);
    return code === grpc.status.OK ? "ok" : code === grpc.status.NOT_FOUND ? "notfound" : "failed";
  };
  // This daprd's WatchJobs connection for the app target: up while it serves and the app is healthy (dapr
  // pkg/runtime/runtime.go appHealthChanged -> jobsManager.StartApp / StopApp).
  const disconnect = scheduler.connect({ deliver, deliverable: () => running() && app.healthy() });

  /** daprd's API error around a Scheduler status: `what` "schedule", "get", "delete" or "list". */
  const apiError = (what: string, e: unknown): unknown => {
    if (!(e instanceof SchedulerStatus)) return e;
    const code = what === "schedule" && e.code === "AlreadyExists" ? Code.ALREADY_EXISTS : Code.INTERNAL;
    return new GatewayError(code, `failed to ${what} job due to: ${e.message}`);
  };
  // No Scheduler: pkg/runtime/scheduler/internal/clients/clients.go Next fails "scheduler clients are disabled",
  // which the jobs API returns INTERNAL.
  const h = (what: string, fn: (req: any) => Promise<object>) =>
    unaryHandler(token, async (req) => {
      if (!schedulerConfigured) throw new GatewayError(Code.INTERNAL, `failed to ${what} job due to: scheduler clients are disabled`);
      try {
        return await fn(req);
      } catch (e) {
        throw apiError(what, e);
      }
    });
  return {
    callbacks,
    close() {
      disconnect();
      clients?.v18.close();
      clients?.alpha.close();
      clients = undefined;
    },
    handlers: {
      ScheduleJobAlpha1: h("schedule", async (req: { job?: DaprJob | null; overwrite: boolean }) => {
        const job = req.job;
        if (!job) throw new GatewayError(Code.INVALID_ARGUMENT, "Job is empty");
        if (!job.name) throw new GatewayError(Code.INVALID_ARGUMENT, "Name is empty");
        if (job.schedule === undefined && job.due_time === undefined) throw new GatewayError(Code.INVALID_ARGUMENT, "Schedule is empty");
        await scheduler.schedule(job, req.overwrite);
        return {};
      }),
      GetJobAlpha1: h("get", async (req: { name: string }) => {
        if (!req.name) throw new GatewayError(Code.INVALID_ARGUMENT, "Name is empty");
        const job = await scheduler.get(req.name);
        if (!job) throw new SchedulerStatus("NotFound", `job not found: ${req.name}`);
        return { job };
      }),
      DeleteJobAlpha1: h("delete", async (req: { name: string }) => {
        if (!req.name) throw new GatewayError(Code.INVALID_ARGUMENT, "Name is empty");
        // daprd's delete is idempotent: a missing job is not an error.
        await scheduler.delete(req.name);
        return {};
      }),
      ListJobsAlpha1: h("list", async () => ({ jobs: await scheduler.list() })),
    },
  };
}
