import * as grpc from "@grpc/grpc-js";
import { daprService } from "../../../src/runtime/dapr/protos.js";

/** A plain Dapr API client for tests that talk to the test sidecar directly (no adapter in between). */
export interface RawDaprClient {
  client: grpc.Client;
  /** Call a unary Dapr method. */
  unary<Res = any>(method: string, request: object, token?: string): Promise<Res>;
  /**
   * Open a streaming subscription and wait for the initial response. `autoAck` false leaves events unacked.
   * Events are collected in `events`.
   */
  subscribe(topic: string, opts?: { pubsub?: string; autoAck?: boolean; token?: string }): Promise<RawSubscription>;
  close(): void;
}

/** One raw streaming subscription. */
export interface RawSubscription {
  call: grpc.ClientDuplexStream<any, any>;
  events: any[];
  ack(id: string, status?: "SUCCESS" | "RETRY" | "DROP"): void;
  cancel(): void;
}

export function rawDaprClient(port: number): RawDaprClient {
  const Ctor = grpc.makeGenericClientConstructor(daprService("Dapr"), "Dapr");
  const client = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const md = (token?: string): grpc.Metadata => {
    const m = new grpc.Metadata();
    if (token) m.set("dapr-api-token", token);
    return m;
  };
  return {
    client,
    unary(method, request, token) {
      return new Promise((resolve, reject) => {
        (client as unknown as Record<string, Function>)[method]!.call(client, request, md(token), (err: grpc.ServiceError | null, res: any) =>
          err ? reject(err) : resolve(res),
        );
      });
    },
    subscribe(topic, opts = {}) {
      const call = (client as unknown as Record<string, Function>)["SubscribeTopicEventsAlpha1"]!.call(client, md(opts.token)) as grpc.ClientDuplexStream<any, any>;
      const events: any[] = [];
      const sub: RawSubscription = {
        call,
        events,
        ack: (id, status = "SUCCESS") => call.write({ event_processed: { id, status: { status } } }),
        cancel: () => call.cancel(),
      };
      return new Promise((resolve, reject) => {
        call.on("data", (m: any) => {
          if (m.initial_response) return resolve(sub);
          if (m.event_message) {
            events.push(m.event_message);
            if (opts.autoAck !== false) sub.ack(m.event_message.id);
          }
        });
        call.on("error", reject);
        call.write({ initial_request: { pubsub_name: opts.pubsub ?? "pubsub", topic, metadata: {} } });
      });
    },
    close: () => client.close(),
  };
}
