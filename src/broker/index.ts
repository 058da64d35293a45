/** The broker: topic table with ref counts, subscriber rings, reaper. Pure logic (no grpc-js, uWS or workers). */
export { createBroker, notLive, subscribeFailure, subscribeFailureKind, type SubscribeFailureKind, type Broker, type BrokerStats, type Subscription } from "./broker.js";
export { Ring } from "./ring.js";
export { TopicHistory, type HistoryEntry, type HistoryOptions } from "./history.js";
export type { BrokerObserver, BrokerOptions, EndReason, FanoutHandle, FanoutSink, FanoutTrace, SubscriberSink, UpstreamHandle, UpstreamSource } from "./types.js";
