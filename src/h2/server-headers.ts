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
 * A regular field name with a character RFC 9113 8.2.1 forbids (controls, space, upper case, DEL and above, and a
 * colon), or an empty one.
 */
const BAD_NAME = /^$|[\x00-\x20A-Z:\x7f-\uffff]/;
/** A field value with NUL, CR or LF, or with leading or trailing whitespace (RFC 9113 8.2.1). */
const BAD_VALUE = /[\0\r\n]|^[\t ]|[\t ]$/;
/** content-length: digits only (RFC 9110 8.6), at most 15 of them (a safe integer, far beyond any request). */
const CONTENT_LENGTH = /^[0-9]{1,15}$/;

/** A regular (non-pseudo) field that makes a message malformed wherever it appears (RFC 9113 8.2). */
function badField(name: string, value: string): boolean {
  return BAD_NAME.test(name) || BAD_VALUE.test(value) || CONNECTION_SPECIFIC.has(name) || (name === "te" && value !== "trailers");
}

/**
 * Collects one request's header list while the connection's HPACK decoder runs (one instance per connection, reset
 * per header block). It stops keeping fields past the list size limit (the block is still decoded to the end, so the
 * dynamic table stays in step) and notes what makes a request malformed (RFC 9113 8.2, 8.3): a name with a character
 * 8.2.1 forbids (upper case, controls, a colon), a value with NUL, CR or LF or with leading or trailing whitespace, a
 * connection-specific field, `te` other than "trailers", a pseudo-header after a regular field, unknown or repeated,
 * an empty `:path`, a missing `:method`, `:scheme` or `:path` (CONNECT, which lacks the last two, is no gRPC), or a
 * `content-length` that is not a number or differs from another one. The session checks the DATA against
 * `contentLength` (RFC 9113 8.1.1).
 */
export class RequestHeaders implements HeaderSink {
  fields: HeaderList = [];
  /** The list exceeded the size limit (and `fields` is incomplete). */
  over = false;
  private size = 0;
  private bad = false;
  private regularSeen = false;
  private pseudo = 0;
  /** The request's content-length, -1 when it has none. */
  contentLength = -1;

  constructor(private readonly maxListSize: number) {}

  /** Start a new header block. */
  reset(): void {
    this.fields = [];
    this.size = 0;
    this.over = false;
    this.bad = false;
    this.regularSeen = false;
    this.pseudo = 0;
    this.contentLength = -1;
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
      if ((bit === P_PATH && value === "") || BAD_VALUE.test(value)) this.bad = true;
    } else {
      this.regularSeen = true;
      if (badField(name, value)) this.bad = true;
      else if (name === "content-length") {
        const n = CONTENT_LENGTH.test(value) ? Number(value) : -1;
        if (n < 0 || (this.contentLength >= 0 && n !== this.contentLength)) this.bad = true;
        this.contentLength = n;
      }
    }
    this.fields.push([name, value]);
  }
}

/**
 * Checks a client's trailers (a second header block on a stream) without keeping them (gRPC clients send none): no
 * pseudo-header (RFC 9113 8.1), and the same name and value rules as a request's fields.
 */
export class TrailerCheck implements HeaderSink {
  bad = false;

  reset(): void {
    this.bad = false;
  }

  header(name: string, value: string): void {
    if (!this.bad && (name.charCodeAt(0) === 58 || badField(name, value))) this.bad = true;
  }
}
