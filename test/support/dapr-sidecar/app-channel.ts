import * as grpc from "@grpc/grpc-js";
import { appCallbackWithJobEvent, daprService } from "../../../src/runtime/dapr/protos.js";

/** What the sidecar knows about the app and how it probes it. */
export interface AppChannelOptions {
  address(): string | undefined;
  /** Whether the sidecar is serving (probes stop while it is down). */
  running(): boolean;
  /** App health checks (dapr.io/enable-app-health-check); absent = the app counts as healthy. */
  healthCheck?: { intervalMs?: number; threshold?: number };
}

/** daprd's view of the app's health, driven by its probes. */
export interface AppChannel {
  address(): string | undefined;
  readonly healthy: boolean;
  /** Every ListTopicSubscriptions call made when the app turned healthy. */
  readonly listings: Array<{ ok: boolean; code?: number }>;
  /** Resolve once the app is healthy (at once when it is), or after `timeoutMs` with false. */
  whenHealthy(timeoutMs: number): Promise<boolean>;
  start(): void;
  stop(): void;
  close(): void;
}

/**
 * daprd's app health checking over the gRPC app channel: `AppCallbackHealthCheck/HealthCheck` every interval with
 * NO `dapr-api-token` (dapr `pkg/channel/grpc/grpc_channel.go` HealthProbe; only sendJob adds the app token), healthy
 * on the first success, unhealthy after `threshold` failures in a row (`pkg/apphealth`). When the app turns healthy,
 * daprd calls `AppCallback/ListTopicSubscriptions`, again without a token (`pkg/runtime/pubsub/subscriptions.go`
 * GetSubscriptionsGRPC), and starts the app's jobs (`pkg/runtime/runtime.go` appHealthChanged -> jobsManager.StartApp).
 */
export function appChannel(o: AppChannelOptions): AppChannel {
  const check = o.healthCheck;
  let healthy = !check;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let clients: { address: string; hc: grpc.Client; cb: grpc.Client } | undefined;
  const listings: Array<{ ok: boolean; code?: number }> = [];
  const waiters = new Set<() => void>();

  const clientsFor = (address: string) => {
    if (clients?.address === address) return clients;
    clients?.hc.close();
    clients?.cb.close();
    const HC = grpc.makeGenericClientConstructor(daprService("AppCallbackHealthCheck"), "AppCallbackHealthCheck");
    const CB = grpc.makeGenericClientConstructor(appCallbackWithJobEvent(), "AppCallback");
    const creds = grpc.credentials.createInsecure();
    // A real daprd is another process: its channel must not share grpc-js's global subchannel pool with the test's
    // own clients of the gateway, or a probe that found the port closed (TRANSIENT_FAILURE, backing off) would make
    // the test's first calls fail UNAVAILABLE.
    const opts = { "grpc.use_local_subchannel_pool": 1 };
    return (clients = { address, hc: new HC(address, creds, opts), cb: new CB(address, creds, opts) });
  };
  // No metadata at all: daprd sends no token on these two calls.
  const call = (client: grpc.Client, method: string): Promise<grpc.ServiceError | null> =>
    new Promise((resolve) =>
      (client as unknown as Record<string, Function>)[method]!.call(client, {}, new grpc.Metadata(), { deadline: Date.now() + 1000 }, (err: grpc.ServiceError | null) => resolve(err)),
    );

  const probe = async (): Promise<void> => {
    const address = o.address();
    if (!address || !o.running()) return;
    const c = clientsFor(address);
    const err = await call(c.hc, "HealthCheck");
    if (!err) {
      failures = 0;
      if (!healthy) {
        healthy = true;
        const listErr = await call(c.cb, "ListTopicSubscriptions");
        listings.push(listErr ? { ok: false, code: listErr.code } : { ok: true });
        for (const w of [...waiters]) w();
      }
    } else if (++failures >= (check?.threshold ?? 3)) healthy = false;
  };

  const loop = (): void => {
    timer = setTimeout(() => {
      void probe().finally(() => {
        if (timer) loop();
      });
    }, check?.intervalMs ?? 100);
    timer.unref();
  };

  return {
    address: o.address,
    get healthy() {
      return healthy;
    },
    listings,
    whenHealthy(timeoutMs) {
      if (healthy) return Promise.resolve(true);
      return new Promise((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          waiters.delete(done);
          resolve(healthy);
        };
        const t = setTimeout(done, timeoutMs);
        t.unref();
        waiters.add(done);
      });
    },
    start() {
      if (check && !timer) loop();
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
    close() {
      clearTimeout(timer);
      timer = undefined;
      for (const w of [...waiters]) w();
      clients?.hc.close();
      clients?.cb.close();
      clients = undefined;
    },
  };
}
