import type { HeaderSink } from "./hpack.js";
import type { HeaderList } from "./types.js";

// Request pseudo-headers (RFC 9113 8.3.1) as bits, to notice unknown, repeated and missing ones.
const P_METHOD = 1;
const P_SCHEME = 2;
const P_PATH = 4;
const P_AUTHORITY = 8;
const P_REQUIRED = P_METHOD | P_SCHEME | P_PATH;
const PSEUDO: Record<string, number> = Object.assign(Object.create(null) as Record<string, number>, {
  ":method": P_METHOD,
  ":scheme": P_SCHEME,
  ":path": P_PATH,
  ":authority": P_AUTHORITY,
});
/** Fields that are HTTP/1.1 connection management and make an HTTP/2 request malformed (RFC 9113 8.2.2). */
const CONNECTION_SPECIFIC = new Set(["connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade"]);
/** The RFC 7541 4.1 overhead of each field in a header list's size. */
const FIELD_OVERHEAD = 32;

/**
 * Collects one request's header list while the connection's HPACK decoder runs (one instance per connection, reset
 * per header block). It stops keeping fields past the list size limit (the block is still decoded to the end, so the
 * dynamic table stays in step) and notes what makes a request malformed (RFC 9113 8.2, 8.3): an upper-case name, a
 * connection-specific field, `te` other than "trailers", a pseudo-header after a regular field, unknown or repeated,
 * an empty `:path`, or a missing `:method`, `:scheme` or `:path` (CONNECT, which lacks the last two, is no gRPC).
 */
export class RequestHeaders implements HeaderSink {
  fields: HeaderList = [];
  /** The list exceeded the size limit (and `fields` is incomplete). */
  over = false;
  private size = 0;
  private bad = false;
  private regularSeen = false;
  private pseudo = 0;

  constructor(private readonly maxListSize: number) {}

  /** Start a new header block. */
  reset(): void {
    this.fields = [];
    this.size = 0;
    this.over = false;
    this.bad = false;
    this.regularSeen = false;
    this.pseudo = 0;
  }

  /** The block decoded so far is a well-formed request. */
  get wellFormed(): boolean {
    return !this.bad && (this.pseudo & P_REQUIRED) === P_REQUIRED;
  }

  /** The fields collected, handed over (the next block starts a new list). */
  take(): HeaderList {
    const f = this.fields;
    this.fields = [];
    return f;
  }

  header(name: string, value: string): void {
    if (this.over) return;
    this.size += name.length + value.length + FIELD_OVERHEAD;
    if (this.size > this.maxListSize) {
      this.over = true;
      return;
    }
    if (name.charCodeAt(0) === 58) {
      const bit = PSEUDO[name] ?? 0;
      if (this.regularSeen || bit === 0 || (this.pseudo & bit) !== 0) this.bad = true;
      this.pseudo |= bit;
      if (bit === P_PATH && value === "") this.bad = true;
    } else {
      this.regularSeen = true;
      for (let i = 0; i < name.length; i++) {
        const c = name.charCodeAt(i);
        if (c >= 65 && c <= 90) this.bad = true;
      }
      if (CONNECTION_SPECIFIC.has(name) || (name === "te" && value !== "trailers")) this.bad = true;
    }
    this.fields.push([name, value]);
  }
}
