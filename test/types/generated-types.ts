/**
 * Compile-time proof that the code follows the protos. `npm run typecheck` (the first step of `npm test`) regenerates
 * src/gen/ from proto/ (scripts/gen-protos.mjs) and then type-checks this file with the rest: nothing here runs.
 *
 * - Handlers, ops inputs, the Dapr adapter and the client take the generated types, so a field renamed, removed or
 *   retyped in a .proto fails the build where it is used; the assertions below pin that the handlers' request and
 *   response types are the generated ones (not a hand-written look-alike that would hide a change).
 * - The in-process CloudEvent (shared/cloudevent.ts) and the generated CloudEvent convert both ways without a cast.
 * - `@ts-expect-error` lines show what the compiler now refuses; each would itself fail if the proto gained the field.
 */
import type { CloudEvent as WireCloudEvent, CloudEvent__Output } from "../../src/gen/gateway/io/cloudevents/v1/CloudEvent.js";
import type { PubsubHandlers } from "../../src/gen/gateway/io/cloudevents/v1/Pubsub.js";
import type { PublishRequest__Output } from "../../src/gen/gateway/io/cloudevents/v1/PublishRequest.js";
import type { GatewayHandlers } from "../../src/gen/gateway/platform/Gateway.js";
import type { InvokeRequest__Output } from "../../src/gen/gateway/platform/InvokeRequest.js";
import type { InvokeResponse, InvokeResponse__Output } from "../../src/gen/gateway/platform/InvokeResponse.js";
import type { DeleteBulkStateRequest__Output } from "../../src/gen/gateway/platform/DeleteBulkStateRequest.js";
import type { DeleteStateRequest__Output } from "../../src/gen/gateway/platform/DeleteStateRequest.js";
import type { QueryStateRequest__Output } from "../../src/gen/gateway/platform/QueryStateRequest.js";
import type { SaveStateRequest__Output } from "../../src/gen/gateway/platform/SaveStateRequest.js";
import type { ScheduleTriggerRequest__Output } from "../../src/gen/gateway/platform/ScheduleTriggerRequest.js";
import type { StateHandlers } from "../../src/gen/gateway/platform/State.js";
import type { GrpcImpl } from "../../src/grpc/server.js";
import type { DeleteBulkStateInput, DeleteStateInput, QueryStateInput, SaveStateInput } from "../../src/ops/state-types.js";
import type { TriggerInput } from "../../src/ops/trigger.js";
import type { DaprRequest, DaprResponse } from "../../src/runtime/dapr/connection.js";
import type { RequestOf, ResponseOf } from "../../src/client/transport.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;

type Unary<F> = F extends (req: infer Req, ...rest: never[]) => Promise<infer Res> ? [Req, Res] : never;

// The gRPC handlers' types are the generated ones.
export type InvokeHandlerTakesGenerated = Assert<Equal<Unary<NonNullable<GrpcImpl<GatewayHandlers>["InvokeJson"]>>, [InvokeRequest__Output, InvokeResponse]>>;
export type PublishHandlerTakesGenerated = Assert<Equal<Unary<NonNullable<GrpcImpl<PubsubHandlers>["PublishEvent"]>>[0], PublishRequest__Output>>;
// The client sends and reads the same generated types.
export type ClientInvokeIsGenerated = Assert<Equal<ResponseOf<"platform.Gateway", "InvokeJson">, InvokeResponse__Output>>;
export type ClientSaveStateRequest = Assert<Equal<keyof RequestOf<"platform.State", "SaveState">, keyof SaveStateRequest__Output>>;
// The Dapr adapter's calls are typed by method from @dapr/dapr's protos.
export type DaprGetStateKeys = Assert<Equal<keyof DaprRequest<"GetState">, "store_name" | "key" | "consistency" | "metadata">>;
export type DaprGetStateReply = Assert<Equal<keyof DaprResponse<"GetState">, "data" | "etag" | "metadata">>;

// What gRPC decodes is a valid ops input, with no conversion.
export const saveInput = (r: SaveStateRequest__Output): SaveStateInput => r;
export const deleteInput = (r: DeleteStateRequest__Output): DeleteStateInput => r;
export const deleteBulkInput = (r: DeleteBulkStateRequest__Output): DeleteBulkStateInput => r;
export const queryInput = (r: QueryStateRequest__Output): QueryStateInput => r;
export const triggerInput = (r: ScheduleTriggerRequest__Output): TriggerInput => r;

// The in-process CloudEvent is the generated one: decoded events are CloudEvents, CloudEvents encode as they are.
export const fromWire = (e: CloudEvent__Output): CloudEvent => e;
export const toWire = (e: CloudEvent): WireCloudEvent => e;

// What the compiler refuses now.
export const handlers: GrpcImpl<StateHandlers> = {
  GetState: async (req) => {
    // @ts-expect-error GetStateRequest has no field `store`: a handler cannot read what the proto does not declare.
    void req.store;
    return { key: req.key, value: "", etag: "" };
  },
  // @ts-expect-error SaveStateResponse has no field `saved`: a handler cannot answer what the proto does not declare.
  SaveState: async () => ({ saved: true }),
};
