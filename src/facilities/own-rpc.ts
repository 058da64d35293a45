import { GATEWAY_SERVICES, gatewayFileDescriptors } from "../shared/protos.js";
import { createBackendRegistry, type BackendRegistry } from "../backends/registry.js";
import { createDispatchOps, type DispatchDeps } from "../ops/dispatch.js";
import type { InvokeStreamDeps } from "../ops/invoke-stream.js";
import type { GatewayContext } from "../ops/context.js";
import { methodLookup, type RpcTarget } from "../rpcweb/hook.js";

/** The gateway's own services as a backend, in metric labels and messages: no registered service name has brackets. */
export const OWN_BACKEND = "(gateway)";

/** The gateway's own gRPC services as a browser RPC target. */
export interface OwnServices {
  /** The target of `service` when it is one of the gateway's own and the gRPC port is reachable, else undefined. */
  target(service: string): RpcTarget | undefined;
  close(): void;
}

const OWN = new Set<string>(GATEWAY_SERVICES);

/** Where a loopback client reaches a server bound to `host` (a wildcard address is reached on loopback). */
function dialHost(host: string): string {
  if (host === "0.0.0.0") return "127.0.0.1";
  if (host === "::" || host === "[::]") return "::1";
  return host;
}

/**
 * Browser RPC to the gateway's own services (platform.Gateway, platform.State, ...): each call goes to the gateway's
 * own gRPC port over loopback HTTP/2, as to a backend whose schema is the gateway's protos, with the caller's key. The
 * gRPC port then runs the operation as for any gRPC caller (auth again, its limits, its metrics), so no operation has a
 * second implementation. Not served when the gRPC port serves TLS (the loopback client would need a certificate the
 * gateway's own name may not match) or before it listens.
 */
export function createOwnServices(
  ctx: GatewayContext,
  port: (() => number | undefined) | undefined,
  deps: Omit<DispatchDeps, "services" | "backends" | "offload" | "offloadMinInflight">,
  stream: InvokeStreamDeps,
  track: <R>(call: () => Promise<R>) => Promise<R>,
): OwnServices {
  let made: { registry: BackendRegistry; target: RpcTarget } | undefined;
  const make = (p: number): RpcTarget => {
    const registry = createBackendRegistry([{ name: OWN_BACKEND, host: dialHost(ctx.options.host), port: p }], {
      channelsPerBackend: 1,
      maxReceiveBytes: 64 * 1024 * 1024,
      // The schema is the gateway's own protos, known without asking: its reflection needs a key, and it is this process.
      backend: { schemaSource: async () => ({ files: gatewayFileDescriptors(), services: [...GATEWAY_SERVICES], version: "v1" }) },
    });
    const ops = createDispatchOps({ ...deps, services: ctx.services, backends: registry });
    const backend = registry.get(OWN_BACKEND)!;
    const target: RpcTarget = {
      backend: OWN_BACKEND,
      ops: { invoke: (input) => track(() => ops.invoke(input)), invokeBytes: (input) => track(() => ops.invokeBytes(input)) },
      stream: { ...stream, backendOf: () => backend },
      methodOf: methodLookup(backend),
      passKey: true,
    };
    made = { registry, target };
    return target;
  };
  return {
    target(service) {
      if (!OWN.has(service) || ctx.options.tls) return undefined;
      if (made) return made.target;
      const p = port?.();
      return p === undefined || p === 0 ? undefined : make(p);
    },
    close: () => made?.registry.close(),
  };
}
