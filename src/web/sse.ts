import type uws from "uWebSockets.js";
import type { EndReason } from "../broker/index.js";
import { invalidArgument } from "../shared/gateway-error.js";
import { authenticate, checkTopics, webAdmission, type Grant } from "./access.js";
import { subscribeError, type TopicFanout, type WebEvent } from "./hub.js";
import { requestHeaders } from "../http/router.js";
import { answerPreflight, type PreflightPolicy } from "../http/preflight.js";
import { overConnectionBound, refuse, type WebDeps } from "./web-deps.js";
import { endWith, httpServerSpan } from "../observe/span.js";
import { callDeadlines, type Expiring } from "../shared/deadline-queue.js";

/** The span of an SSE subscription's start, under the request's trace context. */
const SSE_SPAN = httpServerSpan("GET", "/v1/pubsub/events");

/** Topics one SSE request may name. */
export const MAX_SSE_TOPICS = 64;
/** Comment heartbeat period: below uWS's 10 s HTTP idle timeout, so an idle stream stays open. */
const HEARTBEAT_MS = 8000;
/** The `retry:` hint, ms: how soon EventSource reconnects after a drop. */
const RETRY_MS = 1000;

interface SseSub extends Expiring {
  res: uws.HttpResponse;
  topics: string[];
  grant: Grant;
  closed: boolean;
  /** Events handed to uWS since the response last had nothing buffered (the bound counts these). */
  backlog: number;
  blocked: boolean;
  /** Messages delivered this loop turn, written together at its end (null when none). */
  outbox: Buffer[] | null;
}

/** The SSE front: `GET /v1/pubsub/events` on the uWS app and its fan-out outlet. */
export interface SseFront {
  fanout: TopicFanout;
  readonly size: number;
  /** End every stream with `event: end` reason shutdown. */
  closeAll(): void;
}

/** Mount `/v1/pubsub/events` on `app`. */
export function mountSse(app: uws.TemplatedApp, deps: WebDeps): SseFront {
  const { hub, metrics } = deps;
  const byTopic = new Map<string, Set<SseSub>>();
  const open = new Set<SseSub>();

  function detach(sub: SseSub): void {
    if (sub.closed) return;
    sub.closed = true;
    open.delete(sub);
    deps.connections.open--;
    callDeadlines.remove(sub);
    metrics.subscribers.dec({ transport: "sse" });
    for (const t of sub.topics) {
      const set = byTopic.get(t);
      set?.delete(sub);
      if (set?.size === 0) byTopic.delete(t);
      hub.release(t);
    }
  }

  /** A stream's token expired (its `deadlinePassed`, called by the thread's deadline queue). */
  function tokenExpired(this: SseSub): void {
    end(this, "token-expired", "token-expired", true);
  }

  /** End a stream: `event: end` with the reason (unless it is too far behind to read it), then close. */
  function end(sub: SseSub, reason: string, metricReason: string, graceful: boolean): void {
    if (sub.closed) return;
    metrics.reaped.inc({ transport: "sse", reason: metricReason });
    const { res } = sub;
    const box = graceful ? sub.outbox : null;
    sub.outbox = null;
    detach(sub);
    res.cork(() => {
      if (graceful) {
        for (const f of box ?? []) res.write(f);
        res.write(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
        res.end();
      } else res.close();
    });
  }

  /** Write one message; call inside a cork callback (uWS warns about writes outside one). */
  function write(sub: SseSub, frame: string | Buffer): void {
    if (sub.closed) return;
    if (sub.blocked && ++sub.backlog > deps.boundEvents) return end(sub, "slow", "slow", false);
    const ok = sub.res.write(frame);
    if (!ok && !sub.blocked) {
      sub.blocked = true;
      sub.backlog = 1;
      // uWS calls this after each partial drain; it does not say how much is left (HttpResponse has no buffered
      // amount). A two-byte comment probes it: its write succeeds only when nothing is buffered any more.
      sub.res.onWritable(() => {
        if (!sub.blocked || sub.closed) return true;
        if (!sub.res.write(":\n\n")) return false;
        sub.blocked = false;
        sub.backlog = 0;
        return true;
      });
    }
  }

  let dirty: SseSub[] = [];
  /** The events queued this loop turn (once each, however many subscribers): their delivery latency ends at the flush. */
  let queued: WebEvent[] = [];
  let flushScheduled = false;
  /** Write each subscriber's queued messages in one corked batch (one send() per subscriber per loop turn). */
  function flush(): void {
    flushScheduled = false;
    const subs = dirty;
    const events = queued;
    dirty = [];
    queued = [];
    for (const sub of subs) {
      const box = sub.outbox;
      sub.outbox = null;
      if (box === null || sub.closed) continue;
      sub.res.cork(() => {
        for (const f of box) write(sub, f);
      });
    }
    metrics.latency.observeAll("sse", events);
  }

  const heartbeat = setInterval(() => {
    for (const sub of [...open]) if (!sub.blocked && !sub.closed) sub.res.cork(() => write(sub, ": heartbeat\n\n"));
  }, HEARTBEAT_MS);
  heartbeat.unref();

  const fanout: TopicFanout = {
    deliver(event: WebEvent) {
      const subs = byTopic.get(event.topic);
      if (!subs || subs.size === 0) return 0;
      const frame = event.sseBytes;
      queued.push(event);
      // Queue per subscriber and write once per loop turn (flush): a write made inside a uWS callback of another
      // socket (a REST publish delivering synchronously) cannot be corked and costs four send() calls.
      for (const sub of subs) {
        if (sub.outbox === null) {
          sub.outbox = [];
          dirty.push(sub);
        }
        sub.outbox.push(frame);
      }
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flush);
      }
      return subs.size;
    },
    endTopic(topic, reason: EndReason) {
      for (const sub of [...(byTopic.get(topic) ?? [])]) {
        if (reason.kind === "shutdown") end(sub, "shutdown", "shutdown", true);
        else if (reason.kind === "slow") end(sub, "slow", "slow", true);
        else end(sub, `upstream-failed: ${topic}`, reason.kind, true);
      }
    },
  };

  // CORS preflight, for browsers that send one (EventSource itself does not; fetch-based readers with headers do).
  const preflight: PreflightPolicy = { allowed: (o, host) => deps.origins.allowed(o, host), methods: "GET", headers: "last-event-id, x-api-key", maxAgeSeconds: 600 };
  app.options("/v1/pubsub/events", (res, req) => void answerPreflight(res, req, preflight));

  app.get("/v1/pubsub/events", (res, req) => {
    const { headers } = requestHeaders(req);
    const origin = headers["origin"] || undefined;
    const host = headers["host"];
    const apiKey = headers["x-api-key"] || undefined;
    const lastEventIdHeader = headers["last-event-id"] || undefined;
    const query = new URLSearchParams(req.getQuery() ?? "");
    let aborted = false;
    /** This request holds a slot of --web-max-connections that no stream owns yet. */
    let reserved = false;
    let sub: SseSub | undefined;
    res.onAborted(() => {
      aborted = true;
      if (sub) detach(sub);
    });
    const cors: Record<string, string> = origin && deps.origins.allowed(origin, host) ? { "access-control-allow-origin": origin, vary: "Origin" } : {};
    void (async () => {
      const refusal = webAdmission(deps.isClosing(), deps.origins, origin, host);
      if (refusal) throw refusal;
      const grant = authenticate(deps, apiKey, query.getAll("token"));
      const full = overConnectionBound(deps, "sse");
      if (full) throw full;
      // Counted from here, not once the topics are acquired (a new topic may wait on the runtime): a burst of
      // requests cannot pass the bound together. Given back below if the stream does not open.
      deps.connections.open++;
      reserved = true;
      if (query.getAll("topic").length === 0) throw invalidArgument("topic", "query parameter is required: ?topic=a&topic=b");
      const topics = [...new Set(checkTopics("topic", query.getAll("topic"), grant, MAX_SSE_TOPICS))];
      const sinceText = lastEventIdHeader ?? query.get("lastEventId") ?? undefined;
      const since = sinceText ? hub.parsePosition(lastEventIdHeader ? "Last-Event-ID" : "lastEventId", sinceText) : undefined;
      const span = deps.traceSubscribe?.({ traceparent: headers["traceparent"], tracestate: headers["tracestate"], server: SSE_SPAN }, topics.length);
      const acquiring = hub.acquire(topics, undefined, since);
      const backfill = await (span ? endWith(span, acquiring) : acquiring);
      if (aborted) {
        for (const t of topics) hub.release(t);
        reserved = false;
        deps.connections.open--;
        return;
      }
      const s: SseSub = { res, topics, grant, closed: false, backlog: 0, blocked: false, outbox: null, deadlineSlot: -1, deadlinePassed: tokenExpired };
      sub = s;
      open.add(s);
      reserved = false; // end() gives the slot back from here on
      metrics.subscribers.inc({ transport: "sse" });
      // Replay and going live in one synchronous block: no event can fall between them.
      const resume = since ? hub.resume(topics, since, backfill) : undefined;
      res.cork(() => {
        res.writeStatus("200 OK");
        res.writeHeader("content-type", "text/event-stream");
        res.writeHeader("cache-control", "no-store");
        res.writeHeader("x-accel-buffering", "no");
        for (const [k, v] of Object.entries(cors)) res.writeHeader(k, v);
        res.write(`retry: ${RETRY_MS}\n: subscribed ${topics.length} topics\n\n`);
      });
      res.cork(() => {
        if (resume && !resume.recovered) write(s, `event: recovery\ndata: {"recovered":false}\n\n`);
        if (resume?.recovered) for (const e of resume.events) write(s, e.sseBytes);
        // The current position as the last event id, so a reconnect before any event still resumes from here.
        write(s, `id: ${hub.position()}\n\n`);
      });
      for (const t of topics) {
        let set = byTopic.get(t);
        if (!set) byTopic.set(t, (set = new Set()));
        set.add(s);
      }
      // One timer for every stream's token (a timer each would leave Node a list per distinct delay when it closes).
      if (grant.expiresAt !== null) callDeadlines.add(s, grant.expiresAt);
    })().catch((e: unknown) => {
      if (reserved) {
        reserved = false;
        deps.connections.open--;
      }
      const err = subscribeError(e);
      metrics.refused.inc({ transport: "sse", code: err.codeName });
      if (!aborted && !sub) refuse(res, err, cors);
    });
  });

  return {
    fanout,
    get size() {
      return open.size;
    },
    closeAll() {
      clearInterval(heartbeat);
      for (const sub of [...open]) end(sub, "shutdown", "shutdown", true);
    },
  };
}
