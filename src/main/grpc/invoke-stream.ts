import type * as grpc from "@grpc/grpc-js";
import type { InvokeStreamRequest__Output } from "../../gen/gateway/platform/InvokeStreamRequest.js";
import type { InvokeStreamResponse } from "../../gen/gateway/platform/InvokeStreamResponse.js";
import { Code } from "../../shared/code.js";
import { inBandError } from "../../shared/status.js";
import type { MetadataFilter } from "../forward-metadata.js";
import { startInvokeStream, type InvokeStreamDeps } from "../ops/invoke-stream.js";
import { deadlineOf } from "./server.js";

/**
 * `platform.Gateway/InvokeStream`: a thin shell over startInvokeStream. Flow control both ways: the inbound stream
 * is paused while a request message is being converted and sent (so a slow backend slows the caller), and the
 * backend is not read while grpc-js's write buffer is full (`write()` false until `drain`).
 */
export function invokeStreamGrpc(deps: InvokeStreamDeps, filter: MetadataFilter): (call: grpc.ServerDuplexStream<InvokeStreamRequest__Output, InvokeStreamResponse>) => void {
  return (call) => {
    let handle: ReturnType<typeof startInvokeStream> | undefined;
    let finished = false;
    call.on("error", () => undefined);
    call.on("drain", () => handle?.resume());
    call.once("cancelled", () => {
      if (finished) return;
      if (handle) handle.cancel("the caller cancelled the call");
      else finished = true;
    });
    call.on("data", (req: InvokeStreamRequest__Output) => {
      if (!handle) {
        handle = startInvokeStream(
          deps,
          { service: req.service, method: req.method, requestData: req.request_data, metadata: filter.fromGrpc(call.metadata), deadline: deadlineOf(call) },
          {
            message: (json) => call.write({ response_data: json }),
            end(status) {
              finished = true;
              call.removeAllListeners("data");
              call.write({ status });
              call.end();
            },
          },
        );
        return;
      }
      call.pause();
      handle.write(req.request_data).finally(() => call.resume());
    });
    call.on("end", () => {
      if (handle) handle.end();
      else {
        // The caller half-closed without a first request.
        finished = true;
        call.write({ status: inBandError(Code.INVALID_ARGUMENT, "the first request must name service and method") });
        call.end();
      }
    });
  };
}
