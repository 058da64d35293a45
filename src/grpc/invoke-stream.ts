import type { InvokeStreamRequest__Output } from "../gen/gateway/platform/InvokeStreamRequest.js";
import type { InvokeStreamResponse } from "../gen/gateway/platform/InvokeStreamResponse.js";
import { Code } from "../shared/code.js";
import { inBandError, toInBand } from "../shared/status.js";
import { onAbort } from "../shared/signals.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import { startInvokeStream, type InvokeStreamDeps } from "../ops/invoke-stream.js";
import type { BidiCall } from "./native/call-types.js";
import { grpcServerSpan } from "../observe/span.js";

const STREAM_SPAN = grpcServerSpan("platform.Gateway/InvokeStream");

/**
 * `platform.Gateway/InvokeStream`: a thin shell over startInvokeStream. Flow control both ways: the next request
 * message is not taken while one is being converted and sent (so a slow backend slows the caller), and the backend is
 * not read while the call's write buffer is full (`write()` false until `drained()`).
 */
export function invokeStreamGrpc(deps: InvokeStreamDeps, filter: MetadataFilter): (call: BidiCall<InvokeStreamRequest__Output, InvokeStreamResponse>) => Promise<void> {
  return async (call) => {
    let handle: ReturnType<typeof startInvokeStream> | undefined;
    let finished = false;
    onAbort(call.signal, () => {
      if (finished) return;
      if (handle) handle.cancel("the caller cancelled the call");
      else finished = true;
    });
    for await (const req of call.messages()) {
      if (finished) break;
      if (!handle) {
        handle = startInvokeStream(
          deps,
          {
            service: req.service,
            method: req.method,
            requestData: req.request_data,
            metadata: filter.fromGrpc(call.metadata),
            deadline: call.deadline,
            trace: filter.traceOfGrpc(call.metadata, STREAM_SPAN),
          },
          {
            message: (json) => {
              const ok = call.write({ response_data: json });
              if (!ok) void call.drained().then(() => handle?.resume());
              return ok;
            },
            end(status) {
              finished = true;
              call.write({ status: toInBand(status) });
              call.end();
            },
          },
        );
        continue;
      }
      await handle.write(req.request_data);
    }
    if (finished || call.ended) return;
    if (handle) handle.end();
    else {
      // The caller half-closed without a first request.
      finished = true;
      call.write({ status: inBandError(Code.INVALID_ARGUMENT, "the first request must name service and method") });
      call.end();
    }
  };
}
