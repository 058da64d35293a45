import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { isDaprRuntime, type DaprRuntime } from "../runtime/dapr/index.js";
import { appCallbackWithJobEvent, daprService } from "../runtime/dapr/protos.js";
import { unpackString } from "../runtime/dapr/struct.js";
import type { AppCallbackHandlers } from "../gen/dapr/dapr/proto/runtime/v1/AppCallback.js";
import type { AppCallbackAlphaHandlers } from "../gen/dapr/dapr/proto/runtime/v1/AppCallbackAlpha.js";
import type { AppCallbackHealthCheckHandlers } from "../gen/dapr/dapr/proto/runtime/v1/AppCallbackHealthCheck.js";
import type { JobEventRequest__Output } from "../gen/dapr/dapr/proto/runtime/v1/JobEventRequest.js";
import type { JobEventResponse } from "../gen/dapr/dapr/proto/runtime/v1/JobEventResponse.js";
import type { GatewayContext } from "../ops/context.js";
import { createAuthenticator } from "../ops/auth.js";
import type { Facility } from "./facility.js";
import type { CallMetadata } from "../shared/metadata.js";
import type { GrpcImpl, UnaryContext } from "../grpc/server.js";

/** `AppCallback` plus `OnJobEvent`, which appCallbackWithJobEvent() adds with the Alpha method's messages. */
type AppCallbackWithJobEvent = AppCallbackHandlers & { OnJobEvent: AppCallbackAlphaHandlers["OnJobEventAlpha1"] };

/**
 * Dapr's app callbacks, hosted on the gateway's gRPC port when it runs with `--sidecar dapr` (daprd started with
 * `--app-protocol grpc --app-port <gateway gRPC port>`):
 * - `AppCallback`: ListTopicSubscriptions answers an empty list (subscriptions are streaming, made at runtime);
 *   OnJobEvent (daprd v1.18) runs the job handler; the other methods are UNIMPLEMENTED;
 * - `AppCallbackAlpha.OnJobEventAlpha1` (daprd up to v1.17) runs the job handler;
 * - `AppCallbackHealthCheck.HealthCheck` answers OK while the gateway is not shutting down.
 * These calls carry no `x-api-key`. With `appApiToken` ($APP_API_TOKEN) set, a job callback without that exact
 * `dapr-api-token` is rejected UNAUTHENTICATED. HealthCheck and ListTopicSubscriptions are answered without a token:
 * daprd's gRPC app channel never sends one on them (dapr `pkg/channel/grpc/grpc_channel.go` HealthProbe and
 * `pkg/runtime/pubsub/subscriptions.go` GetSubscriptionsGRPC; only sendJob calls AddAppTokenToContext), an app that
 * refused them would never be marked healthy and daprd would never deliver its jobs, and both answers are constant
 * (OK, an empty list), so they reveal nothing. Without a token the job callbacks are open to anyone who reaches the
 * gRPC port, so options validation only allows a loopback host then (src/config/options.ts). A job handler failure is returned as the call's error so daprd applies
 * the job's failure policy; NOT_FOUND tells daprd not to retry.
 */
export function createSidecarCallbackFacility(ctx: GatewayContext): Facility {
  const runtime = ctx.runtime;
  if (runtime.kind !== "dapr") return {};
  const token = ctx.options.appApiToken;
  const counter = ctx.metrics.counter(
    "platform_dapr_job_events_total",
    "Job events daprd delivered to the gateway, by outcome (ok, failed, rejected)",
    ["outcome"],
  );

  // The same check as x-api-key's: hashed first, so neither the token nor its length leaks through timing.
  const appToken = token ? createAuthenticator([token]) : undefined;
  const checkToken = (md: CallMetadata): void => {
    if (!appToken) return;
    const given = md.get("dapr-api-token")[0];
    if (typeof given !== "string" || !appToken.check(given)) {
      counter.inc({ outcome: "rejected" });
      throw new GatewayError(Code.UNAUTHENTICATED, "missing or invalid dapr-api-token on a sidecar callback");
    }
  };

  const onJobEvent = async (req: JobEventRequest__Output, call: UnaryContext): Promise<JobEventResponse> => {
    checkToken(call.metadata);
    const name = req.name || (req.method?.startsWith("job/") ? req.method.slice(4) : "");
    if (!name) throw new GatewayError(Code.INVALID_ARGUMENT, "job event name must not be empty");
    if (!isDaprRuntime(runtime)) throw new GatewayError(Code.FAILED_PRECONDITION, "the runtime cannot take job events");
    try {
      await (runtime as DaprRuntime).jobs.deliver(name, unpackString(req.data));
    } catch (e) {
      counter.inc({ outcome: "failed" });
      const err = GatewayError.from(e);
      ctx.logger.warn({ job: name, code: err.codeName, err: err.message }, "job event handling failed; daprd applies the failure policy");
      throw err;
    }
    counter.inc({ outcome: "ok" });
    return {};
  };

  return {
    extraGrpc: [
      {
        definition: appCallbackWithJobEvent(),
        auth: false,
        impl: {
          // No token check: daprd sends none here (see above).
          ListTopicSubscriptions: async () => ({ subscriptions: [] }),
          OnJobEvent: onJobEvent,
        } satisfies GrpcImpl<AppCallbackWithJobEvent>,
      },
      { definition: daprService("AppCallbackAlpha"), auth: false, impl: { OnJobEventAlpha1: onJobEvent } satisfies GrpcImpl<AppCallbackAlphaHandlers> },
      {
        definition: daprService("AppCallbackHealthCheck"),
        auth: false,
        impl: {
          // No token check: daprd's HealthProbe sends none (see above).
          HealthCheck: async () => ({}),
        } satisfies GrpcImpl<AppCallbackHealthCheckHandlers>,
      },
    ],
  };
}
