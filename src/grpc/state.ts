import type { StoredItem } from "../runtime/state-port.js";
import type { StateHandlers } from "../gen/gateway/platform/State.js";
import type { StateOps } from "../ops/state.js";
import { deleteBulkMessage } from "../ops/state-status.js";
import { inBandOk } from "../shared/status.js";
import type { GrpcImpl } from "./server.js";
import { traceOfGrpc } from "../ops/forward-metadata.js";
import { grpcServerSpan } from "../observe/span.js";

const toItem = (i: StoredItem) => ({ key: i.key, value: i.value, etag: i.etag });

/** `platform.State` over gRPC: thin wrappers over the shared State operations. */
export function stateGrpc(ops: StateOps): GrpcImpl<StateHandlers> {
  const span = (method: string) => grpcServerSpan(`platform.State/${method}`);
  const SAVE = span("SaveState");
  const GET = span("GetState");
  const DELETE = span("DeleteState");
  const QUERY = span("QueryState");
  const GET_BULK = span("GetBulkState");
  const DELETE_BULK = span("DeleteBulkState");
  return {
    SaveState: async (req, { signal, metadata }) => {
      const { etag } = await ops.save(req, signal, traceOfGrpc(ops.tracing, metadata, SAVE));
      return { status: inBandOk(), etag };
    },
    GetState: async (req, { signal, metadata }) => {
      const item = await ops.get(req.service, req.key, signal, traceOfGrpc(ops.tracing, metadata, GET));
      // A missing key is an empty value and etag (Dapr's behaviour), not an error.
      return { key: req.key, value: item?.value ?? "", etag: item?.etag ?? "" };
    },
    DeleteState: async (req, { signal, metadata }) => {
      await ops.delete(req, signal, traceOfGrpc(ops.tracing, metadata, DELETE));
      return { status: inBandOk() };
    },
    QueryState: async (req, { signal, metadata }) => {
      const r = await ops.query(req, signal, traceOfGrpc(ops.tracing, metadata, QUERY));
      return { items: r.items.map(toItem), token: r.token };
    },
    GetBulkState: async (req, { signal, metadata }) => ({
      items: (await ops.getBulk(req.service, req.keys, signal, traceOfGrpc(ops.tracing, metadata, GET_BULK))).map(toItem),
    }),
    DeleteBulkState: async (req, { signal, metadata }) => {
      const r = await ops.deleteBulk(req, signal, traceOfGrpc(ops.tracing, metadata, DELETE_BULK));
      return { status: inBandOk(deleteBulkMessage(r)) };
    },
  };
}
