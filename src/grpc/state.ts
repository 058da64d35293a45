import type { StoredItem } from "../runtime/state-port.js";
import type { StateHandlers } from "../gen/gateway/platform/State.js";
import type { StateOps } from "../ops/state.js";
import { deleteBulkMessage } from "../ops/state-status.js";
import { inBandOk } from "../shared/status.js";
import type { GrpcImpl } from "./server.js";

const toItem = (i: StoredItem) => ({ key: i.key, value: i.value, etag: i.etag });

/** `platform.State` over gRPC: thin wrappers over the shared State operations. */
export function stateGrpc(ops: StateOps): GrpcImpl<StateHandlers> {
  return {
    SaveState: async (req, { signal }) => {
      const { etag } = await ops.save(req, signal);
      return { status: inBandOk(), etag };
    },
    GetState: async (req, { signal }) => {
      const item = await ops.get(req.service, req.key, signal);
      // A missing key is an empty value and etag (Dapr's behaviour), not an error.
      return { key: req.key, value: item?.value ?? "", etag: item?.etag ?? "" };
    },
    DeleteState: async (req, { signal }) => {
      await ops.delete(req, signal);
      return { status: inBandOk() };
    },
    QueryState: async (req, { signal }) => {
      const r = await ops.query(req, signal);
      return { items: r.items.map(toItem), token: r.token };
    },
    GetBulkState: async (req, { signal }) => ({
      items: (await ops.getBulk(req.service, req.keys, signal)).map(toItem),
    }),
    DeleteBulkState: async (req, { signal }) => {
      const r = await ops.deleteBulk(req, signal);
      return { status: inBandOk(deleteBulkMessage(r)) };
    },
  };
}
