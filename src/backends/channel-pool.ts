import * as grpc from "@grpc/grpc-js";
import { grpcCredentials, type BackendTls } from "./backend-tls.js";

/** Options of a channel pool. */
export interface ChannelPoolOptions {
  /** "host:port" */
  address: string;
  /** Number of channels (each its own HTTP/2 connection). */
  size: number;
  /** Largest message accepted from the backend, bytes. */
  maxReceiveBytes: number;
  /** Dial over TLS with these settings. Default: cleartext. */
  tls?: BackendTls;
  /** Called when a channel's connectivity changes (for logs and health). */
  onStateChange?(index: number, state: grpc.connectivityState): void;
}

/** A fixed set of grpc-js clients to one backend, picked round-robin; channels are kept connected. */
export interface ChannelPool {
  readonly address: string;
  readonly size: number;
  /** The next client, round-robin. */
  next(): grpc.Client;
  /** A stable client (the first), e.g. for reflection streams. */
  first(): grpc.Client;
  /** Current connectivity state of every channel. */
  states(): grpc.connectivityState[];
  /** Start connecting every channel now and keep reconnecting idle ones (a backend down at startup is retried). */
  connect(): void;
  /** Close every channel. Safe to call twice. */
  close(): void;
}

/**
 * Reconnect backoff: grpc-js defaults grow to 120 s, far too long to notice a backend that came back; these keep
 * retries cheap and recovery within a couple of seconds.
 */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  // Each client gets its own subchannel, hence its own connection: otherwise grpc-js shares one.
  "grpc.use_local_subchannel_pool": 1,
  "grpc.initial_reconnect_backoff_ms": 250,
  "grpc.max_reconnect_backoff_ms": 2000,
  "grpc.keepalive_time_ms": 30_000,
  "grpc.keepalive_timeout_ms": 10_000,
  "grpc.max_send_message_length": -1,
  // No channelz bookkeeping per call (nothing reads it). Transparent retries stay on: they cover a call that never
  // reached a backend whose connection just dropped.
  "grpc.enable_channelz": 0,
};

/** Create the pool; channels connect lazily until connect() is called. */
export function createChannelPool(opts: ChannelPoolOptions): ChannelPool {
  const clients: grpc.Client[] = [];
  const secure = opts.tls ? grpcCredentials(opts.tls) : { credentials: grpc.credentials.createInsecure(), options: {} };
  for (let i = 0; i < opts.size; i++) {
    clients.push(
      new grpc.Client(opts.address, secure.credentials, {
        ...CHANNEL_OPTIONS,
        ...secure.options,
        "grpc.max_receive_message_length": opts.maxReceiveBytes,
        // Distinct options keep grpc-js from ever merging these channels.
        "platform.pool_index": i,
      }),
    );
  }
  let cursor = 0;
  let closed = false;
  let watching = false;

  const watch = (i: number): void => {
    const channel = clients[i]!.getChannel();
    const state = channel.getConnectivityState(false);
    if (state === grpc.connectivityState.SHUTDOWN || closed) return;
    // An idle channel (never used, or its connection dropped) is asked to connect, so health is truthful and a
    // returning backend is picked up in the background.
    if (state === grpc.connectivityState.IDLE) channel.getConnectivityState(true);
    channel.watchConnectivityState(state, Infinity, () => {
      if (closed) return;
      const now = channel.getConnectivityState(false);
      opts.onStateChange?.(i, now);
      watch(i);
    });
  };

  return {
    address: opts.address,
    size: opts.size,
    next() {
      cursor = cursor + 1 === clients.length ? 0 : cursor + 1;
      return clients[cursor]!;
    },
    first: () => clients[0]!,
    states: () => clients.map((c) => c.getChannel().getConnectivityState(false)),
    connect() {
      if (watching || closed) return;
      watching = true;
      for (let i = 0; i < clients.length; i++) watch(i);
    },
    close() {
      if (closed) return;
      closed = true;
      for (const c of clients) c.close();
    },
  };
}
