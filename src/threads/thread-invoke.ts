import type { CancelSignal } from "../shared/signals.js";
import type { InvokeResult, InvokeWire } from "../ops/dispatch.js";
import type { Bridge } from "./bridge.js";

/** A thread that may take an offloaded invocation. */
export interface InvokeTarget {
  readonly bridge: Bridge;
  readonly state: string;
}

/**
 * The offload of gRPC Invoke/InvokeJson (`--grpc-invoke-offload`, docs/threads.md): each call goes to the running
 * thread with the fewest bridge calls waiting, round robin among equals; undefined when no thread is running (the main
 * thread then runs the call itself).
 */
export function createInvokeOffload(threads: readonly InvokeTarget[]): (wire: InvokeWire, signal: CancelSignal | undefined, timeoutMs: number) => Promise<InvokeResult> | undefined {
  let turn = 0;
  return (wire, signal, timeoutMs) => {
    const n = threads.length;
    if (n === 0) return undefined;
    turn = (turn + 1) % n;
    let best: InvokeTarget | undefined;
    for (let i = 0; i < n; i++) {
      const s = threads[(turn + i) % n]!;
      if (s.state === "running" && (!best || s.bridge.pending < best.bridge.pending)) best = s;
    }
    return best?.bridge.call<InvokeResult>("dispatch.invoke", wire, signal, timeoutMs);
  };
}
