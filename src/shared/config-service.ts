/**
 * A registered service as the configuration listing shows it (the spec's ConfigService, camelCase: the REST form and
 * the client library's). Only the spec's fields: how the gateway dials a backend (channels, the TLS files), the query
 * index and the transcoding rules are its own configuration, not the service's description.
 */
export interface ConfigService {
  name: string;
  /** Absent for non-dialable entries. */
  grpc?: { host: string; port: number };
  pubsub?: { pubsubName: string };
  state?: { storeName: string; keys: string[] };
  jobs?: { crons: Array<{ name: string; schedule: string; targetTopic: string }> };
}
