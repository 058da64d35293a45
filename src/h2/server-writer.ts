import type net from "node:net";
import { CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, PING, frameHeader, writeGoaway, writePingAck, writeRst, writeWindowUpdate } from "./frames.js";
import { headerBlock, type IndexingEncoder } from "./server-encode.js";
import type { HeaderList } from "./types.js";

/**
 * The shared slab's size (a turn that writes more continues in further slabs): several of the largest blocks fit, so
 * a turn of many busy connections fills its slabs instead of leaving most of each one unused.
 */
const SLAB = 256 * 1024;
/**
 * Slabs kept for reuse once a turn's flush has handed their bytes over (4 MiB: a turn of 100 connections with 100
 * streams each writes about 3.3 MB), so a busy thread allocates none from turn to turn.
 */
const SLABS_KEPT = 16;
/**
 * DATA payloads up to this size are copied next to their frame header; larger ones go to the socket as they are, by
 * reference (the write() contract in types.ts: a buffer handed to write() is never changed afterwards).
 */
const COPY_MAX = 4096;
const EMPTY = Buffer.alloc(0);
/**
 * A writer claims the slab in blocks, so its frames stay contiguous (one chunk, one write) while other connections
 * write between them: a block holds what the writer wrote in its previous turn (at least BLOCK_MIN, at most
 * BLOCK_MAX), or the frame at hand when that is larger.
 */
const BLOCK_MIN = 512;
const BLOCK_MAX = 64 * 1024;
/** The least size of a block of a writer's own (see claim()). */
const OWN_BLOCK = 16 * 1024;
/**
 * How long one flush pass may write before it lets the event loop read again (the rest of the writers stay due and
 * are flushed from the next setImmediate, in order). A fan-out to thousands of connections takes milliseconds of
 * socket writes; in slices, requests that arrive meanwhile are read between them, and an event published during a
 * fan-out joins the bytes still waiting for their write: a connection two events behind gets both in one write.
 */
const FLUSH_SLICE_MS = 1;
/** Writers flushed between two looks at the clock. */
const SLICE_CHECK = 8;
/** PING ACKs one connection holds for a later write; one more and they all go now. */
const ACKS_HELD = 4;
/**
 * How long a PING ACK may be held. grpc-go clients (BDP estimation, on by default) PING after each DATA burst they read,
 * and PING again only once the ACK is back. So an ACK that rides with a later write costs no socket write of its own,
 * and the longer it is held, the fewer PINGs a subscriber's connection reads: an ACK rides the connection's last write
 * before the hold runs out (guessed from the gap between its last two writes), or goes on its own when the hold ends
 * (`ackTimerFired`). RFC 9113 6.7 asks for an ACK, not for one at once; what a client learns from the delay is a longer
 * round trip on a connection that trickles, which sizes no window. A connection with DATA waiting for a window gets
 * its ACKs at once (`pingAck`), and held ones go when a stream starts to wait for one. 250 ms: a gateway busy with
 * 10,000 subscribers on their own connections writes each of them about every 150 ms, so with 100 ms an ACK rode the
 * very next write and the client PINGed for every other event.
 */
export const ACK_HOLD_MS = 250;

/** Told after each batched flush (the session checks the socket's backlog there). */
export interface FlushOwner {
  flushed(): void;
  /** The flush threw (a bug of this layer): the owner ends the connection. */
  flushFailed(e: unknown): void;
}

/**
 * What every FrameWriter of this thread shares: the slab the frames are written into (each writer in blocks of it),
 * the writers with frames due (flushed from setImmediate, in slices: flushAll), and the writers holding PING ACKs. A
 * connection owns no output buffer of its own, so an idle one costs none. A block is handed to its socket once, at
 * its writer's flush; the slabs are written again once every writer is flushed, unless a socket kept a view of one
 * (its write did not complete at once): that slab is left to the garbage collector, which frees it once the socket has
 * sent its piece. A socket with a backlog already gets copies, not views, so a slow reader pins at most the one slab
 * its first unfinished write went out of, not one per frame it is behind.
 */
const turn = {
  slab: EMPTY as Buffer,
  pos: 0,
  /** The turn's earlier slabs (full ones), and the slabs ready for reuse (at most SLABS_KEPT). */
  used: [] as Buffer[],
  pool: [] as Buffer[],
  /** The writers with frames to hand over, in the order they began to write, from `dueHead`. */
  due: [] as FrameWriter[],
  dueHead: 0,
  /** Entries taken from `due` so far (a count that only grows: positions in the queue's history). */
  taken: 0,
  /**
   * Writers that wrote a HEADERS frame (an answer, a call's end), from `answersHead`, each with the count of `taken`
   * at which it goes ahead of the rest (see answering()).
   */
  answers: [] as FrameWriter[],
  answersAt: [] as number[],
  answersHead: 0,
  scheduled: false,
  /** Writers holding PING ACKs, in the order they began to, and when (performance.now()); from `heldHead`. */
  held: [] as FrameWriter[],
  heldAt: [] as number[],
  heldHead: 0,
  ackTimer: undefined as ReturnType<typeof setTimeout> | undefined,
  /** When the turn's flush began (performance.now()). */
  now: 0,
};
/** The memory of every slab, and of those a socket holds a view of past its write() call. */
const slabs = new WeakSet<ArrayBufferLike>();
const pinned = new WeakSet<ArrayBufferLike>();

function newSlab(n: number): void {
  if (turn.slab.length > 0) turn.used.push(turn.slab);
  if (n <= SLAB && turn.pool.length > 0) turn.slab = turn.pool.pop()!;
  else {
    turn.slab = Buffer.allocUnsafeSlow(Math.max(SLAB, n));
    slabs.add(turn.slab.buffer);
  }
  turn.pos = 0;
}

/**
 * The turn's flush: every writer with frames hands them to its socket, one write each, in the order they began to
 * write, until the pass has run FLUSH_SLICE_MS; the rest goes on from the next setImmediate. An answer goes ahead of
 * the writes queued before it once half of them are done (answering()).
 */
function flushAll(): void {
  turn.scheduled = false;
  const start = (turn.now = performance.now());
  const due = turn.due;
  let n = 0;
  for (;;) {
    if (turn.answersHead < turn.answers.length && turn.answersAt[turn.answersHead]! <= turn.taken) releaseAnswers();
    if (turn.dueHead === due.length) break;
    // A writer's flushed() may write (a GOAWAY, DATA that waited): it joins `due` again, further on in this pass.
    due[turn.dueHead++]!.flushIfDue();
    turn.taken++;
    if (++n % SLICE_CHECK === 0 && performance.now() - start >= FLUSH_SLICE_MS) break;
  }
  if (turn.dueHead < due.length) {
    // More to write: the loop reads its sockets first. The slabs stay as they are (the writers still due hold blocks
    // of them); the full ones are forgotten past SLABS_KEPT and freed by the collector once written.
    if (turn.dueHead > 1024 && turn.dueHead * 2 > due.length) {
      turn.due = due.slice(turn.dueHead);
      turn.dueHead = 0;
    }
    if (turn.answersHead > 1024 && turn.answersHead * 2 > turn.answers.length) {
      turn.answers = turn.answers.slice(turn.answersHead);
      turn.answersAt = turn.answersAt.slice(turn.answersHead);
      turn.answersHead = 0;
    }
    if (turn.used.length > SLABS_KEPT) turn.used.splice(0, turn.used.length - SLABS_KEPT);
    if (!turn.scheduled) {
      turn.scheduled = true;
      setImmediate(flushAll);
    }
    return;
  }
  turn.due = [];
  turn.dueHead = 0;
  turn.answers = [];
  turn.answersAt = [];
  turn.answersHead = 0;
  // Every block is handed over: the slabs no socket kept a view of are written again.
  for (const s of turn.used) if (!pinned.has(s.buffer) && s.length === SLAB && turn.pool.length < SLABS_KEPT) turn.pool.push(s);
  turn.used.length = 0;
  if (pinned.has(turn.slab.buffer)) turn.slab = EMPTY;
  turn.pos = 0;
}

/** Flush the answers whose turn has come. */
function releaseAnswers(): void {
  const { answers, answersAt } = turn;
  let i = turn.answersHead;
  for (; i < answers.length && answersAt[i]! <= turn.taken; i++) answers[i]!.flushAnswer(answersAt[i]!);
  turn.answersHead = i;
}

function ackTimerFired(): void {
  turn.ackTimer = undefined;
  const { held, heldAt } = turn;
  const now = performance.now();
  let i = turn.heldHead;
  for (; i < held.length; i++) {
    const w = held[i]!;
    // An entry is stale when its writer has sent its ACKs since (and maybe holds newer ones, under a later entry).
    if (w.ackSince !== heldAt[i]) continue;
    if (now - heldAt[i]! < ACK_HOLD_MS - 1) break;
    w.releaseAcks();
  }
  if (i === held.length) {
    turn.held = [];
    turn.heldAt = [];
    turn.heldHead = 0;
    return;
  }
  turn.heldHead = i;
  if (i > 1024 && i * 2 > held.length) {
    turn.held = held.slice(i);
    turn.heldAt = heldAt.slice(i);
    turn.heldHead = 0;
  }
  turn.ackTimer = setTimeout(ackTimerFired, Math.max(1, ACK_HOLD_MS - (now - heldAt[i]!)));
  turn.ackTimer.unref();
}

/**
 * The frames one server connection writes. Frames are written into the thread's shared slab (no Buffer per frame,
 * none per connection) and leave in one socket write per flush: the flush runs from setImmediate, after every
 * request the poll phase read has been answered, so respond() + write() + end() of a unary reply, and the replies of
 * every call that arrived in the same read, are one syscall; a connection still waiting for its flush when the next
 * turn writes to it (flushAll's slices) sends that turn's frames in the same write. A large DATA payload goes to the
 * socket as it is, after its frame header (one writev). PING ACKs ride with a later write of the connection
 * (ACK_HOLD_MS).
 */
export class FrameWriter {
  /** The client's SETTINGS_MAX_FRAME_SIZE: the largest frame payload this side sends. */
  maxFrame = 16_384;
  /** A dynamic table size update (to 0) must start our next header block (the client lowered HEADER_TABLE_SIZE). */
  tableUpdate = false;
  /** This connection's indexing HPACK encoder (H2ServerOptions `headerEncoding: "indexed"`); null: `headerBlock`. */
  encoder: IndexingEncoder | null = null;
  /** Bytes written and not yet handed to the socket. */
  pending = 0;
  /** Drop everything from now on (the connection is gone). */
  closed = false;
  /**
   * When the PING ACKs held now began to be held (performance.now()); their entry in the turn's list carries it too.
   * -0, not 0: V8 gives a field the representation of its first value, and a field made a small integer that later
   * takes a fraction changes the class's hidden map. The first ACK a connection held then deoptimized every function
   * compiled against FrameWriter's map (reserve, data, flush and their callers) on every connection of the process.
   */
  ackSince = -0;
  /** This writer's frames not yet cut into `chunks`: turn slab `segSlab`[segStart, segEnd), in its block up to `blockEnd`. */
  private segSlab: Buffer = EMPTY;
  private segStart = 0;
  private segEnd = 0;
  private blockEnd = 0;
  /** The block is a buffer of this writer's own (claimed while its socket was behind), not a piece of the slab. */
  private own = false;
  /** Bytes written this turn, and in the previous one (the size of the next block claimed). */
  private turnBytes = 0;
  private lastTurnBytes = 0;
  private chunks: Buffer[] = [];
  /** In the turn's `due` list. */
  private due = false;
  /** In the turn's `answers` too: the count of `turn.taken` at which it goes; -1 when not. */
  private answerAt = -1;
  /** Payloads of the PING ACKs held (8 bytes each), made on the first one. */
  private acks: Buffer | null = null;
  private ackCount = 0;
  /** When this writer's last turn flush ran (turn.now); 0 before the first (-0: a double field, see ackSince). */
  private flushedAt = -0;

  constructor(
    private readonly socket: net.Socket,
    private readonly owner: FlushOwner,
  ) {}

  /** An answer's turn has come (its entry is stale when the writer was flushed since, in its place in `due`). */
  flushAnswer(at: number): void {
    if (this.answerAt === at) this.flushIfDue();
  }

  /** The turn's flush of this writer (its entry in `due` is stale when it was flushed since as an answer). */
  flushIfDue(): void {
    if (!this.due) return;
    this.answerAt = -1;
    try {
      if (this.closed) {
        this.due = false;
        this.drop();
        return;
      }
      // Still marked due: the ACKs flush() releases join this write instead of queueing the writer again.
      this.flush(true);
      this.due = false;
      this.flushedAt = turn.now;
      this.owner.flushed();
    } catch (e) {
      this.due = false;
      this.owner.flushFailed(e);
    }
  }

  private drop(): void {
    this.chunks = [];
    this.endBlock();
    this.pending = 0;
    this.ackCount = 0;
  }

  /** The frames are cut (or dropped): the rest of the block is given up, the slab may start over at the turn's end. */
  private endBlock(): void {
    // A block of the writer's own goes on from where it is (no other writer uses it); a slab block is given up.
    if (this.own) this.segStart = this.segEnd;
    else {
      this.segSlab = EMPTY;
      this.segStart = this.segEnd = this.blockEnd = 0;
    }
    this.lastTurnBytes = this.turnBytes;
    this.turnBytes = 0;
  }

  /**
   * Hand everything written so far to the socket now. `holdAcks`: held PING ACKs stay held while the connection's next
   * write, if it comes after the same gap as this one did, is still within ACK_HOLD_MS of the first of them.
   */
  flush(holdAcks = false): void {
    if (this.ackCount > 0 && !this.closed) {
      const now = turn.now;
      if (!holdAcks || now - this.ackSince + (now - this.flushedAt) >= ACK_HOLD_MS) this.releaseAcks();
    }
    this.cut();
    this.endBlock();
    const c = this.chunks;
    if (c.length === 0) return;
    this.pending = 0;
    const socket = this.socket;
    if (socket.destroyed || !socket.writable) {
      c.length = 0;
      return;
    }
    // Behind already: what waits in the socket's queue is a copy, so it holds no slab.
    const backlog = socket.writableLength > 0;
    if (backlog) for (let i = 0; i < c.length; i++) if (slabs.has(c[i]!.buffer)) c[i] = Buffer.from(c[i]!);
    if (c.length === 1) socket.write(c[0]!);
    else {
      socket.cork();
      for (let i = 0; i < c.length; i++) socket.write(c[i]!);
      socket.uncork();
    }
    // Bytes the kernel did not take at once stay views of their slab in the socket's queue: it must not be rewritten.
    if (!backlog && socket.writableLength > 0) for (let i = 0; i < c.length; i++) pinned.add(c[i]!.buffer);
    c.length = 0;
  }

  /**
   * Room for `n` bytes at the returned position of `this.segSlab` (the writer's block, which may be in a slab older than
   * the turn's current one); commit() then moves past what was written.
   */
  private reserve(n: number): number {
    if (this.segEnd + n > this.blockEnd) this.claim(n);
    if (!this.due) {
      this.due = true;
      turn.due.push(this);
      if (!turn.scheduled) {
        turn.scheduled = true;
        setImmediate(flushAll);
      }
    }
    return this.segEnd;
  }

  /** A new block of the slab for this writer (its frames so far are cut into a chunk). */
  private claim(n: number): void {
    this.cut();
    const size = Math.max(n, Math.min(BLOCK_MAX, Math.max(BLOCK_MIN, this.lastTurnBytes)));
    this.own = this.socket.writableLength > 0;
    if (this.own) {
      // The socket is behind: its frames will wait in its queue, so they go into memory of this writer's own, which
      // they alone hold (not a copy of a slab block at the flush, nor a view that pins a slab).
      this.segSlab = Buffer.allocUnsafeSlow(Math.max(size, OWN_BLOCK));
      this.segStart = this.segEnd = 0;
      this.blockEnd = this.segSlab.length;
      return;
    }
    if (turn.pos + size > turn.slab.length) newSlab(size);
    this.segSlab = turn.slab;
    this.segStart = this.segEnd = turn.pos;
    this.blockEnd = turn.pos += size;
  }

  private commit(end: number): void {
    const n = end - this.segEnd;
    this.pending += n;
    this.turnBytes += n;
    this.segEnd = end;
  }

  private cut(): void {
    if (this.segEnd > this.segStart) {
      this.chunks.push(this.segSlab.subarray(this.segStart, this.segEnd));
      this.segStart = this.segEnd;
    }
  }

  /** Prebuilt frames (the greeting, a SETTINGS ACK). */
  buffer(b: Buffer): void {
    const p = this.reserve(b.length);
    b.copy(this.segSlab, p);
    this.commit(p + b.length);
  }

  /**
   * This writer carries an answer (HEADERS: a reply, a call's end): it goes ahead of the writes queued before it once
   * half of them are done. A gateway that has just fanned an event out to thousands of connections answers its
   * publisher half-way through those writes, so the next event arrives while the other half still wait and rides in
   * the same writes. The publisher still waits for the gateway (its answer is the back-pressure): when it has its
   * answer for one event, every write of the event before (to the same connections) has been handed over. With
   * nothing queued, it goes at once.
   */
  private answering(): void {
    if (this.answerAt >= 0) return;
    const at = turn.taken + Math.ceil((turn.due.length - turn.dueHead) / 2);
    this.answerAt = at;
    turn.answers.push(this);
    turn.answersAt.push(at);
  }

  /** HEADERS (and CONTINUATION frames when the block exceeds the client's MAX_FRAME_SIZE). */
  headers(id: number, list: HeaderList, endStream: boolean): void {
    let block = this.encoder === null ? headerBlock(list) : this.encoder.encode(list);
    if (this.tableUpdate) {
      this.tableUpdate = false;
      block = Buffer.concat([Buffer.from([0x20]), block]);
    }
    const len = block.length;
    const es = endStream ? END_STREAM : 0;
    this.answering();
    if (len <= this.maxFrame) {
      const p = this.reserve(9 + len);
      const q = frameHeader(this.segSlab, p, len, HEADERS, END_HEADERS | es, id);
      block.copy(this.segSlab, q);
      this.commit(q + len);
      return;
    }
    for (let off = 0; off < len; ) {
      const n = Math.min(this.maxFrame, len - off);
      const last = off + n === len;
      const p = this.reserve(9 + n);
      const q = frameHeader(this.segSlab, p, n, off === 0 ? HEADERS : CONTINUATION, (off === 0 ? es : 0) | (last ? END_HEADERS : 0), id);
      block.copy(this.segSlab, q, off, off + n);
      this.commit(q + n);
      off += n;
    }
  }

  /** One DATA frame with buf[from, to) (at most maxFrame bytes; the caller splits). */
  data(id: number, buf: Buffer, from: number, to: number, flags: number): void {
    const n = to - from;
    if (n <= COPY_MAX) {
      const p = this.reserve(9 + n);
      const q = frameHeader(this.segSlab, p, n, DATA, flags, id);
      // A whole message (the usual case) is copied by TypedArray set(), a builtin, not Buffer.copy's C++ call.
      if (from === 0 && to === buf.length) this.segSlab.set(buf, q);
      else buf.copy(this.segSlab, q, from, to);
      this.commit(q + n);
    } else {
      const p = this.reserve(9);
      this.commit(frameHeader(this.segSlab, p, n, DATA, flags, id));
      this.cut();
      this.chunks.push(from === 0 && to === buf.length ? buf : buf.subarray(from, to));
      this.pending += n;
      this.turnBytes += n;
    }
  }

  rst(id: number, code: number): void {
    const p = this.reserve(13);
    this.commit(writeRst(this.segSlab, p, id, code));
  }

  windowUpdate(id: number, inc: number): void {
    const p = this.reserve(13);
    this.commit(writeWindowUpdate(this.segSlab, p, id, inc));
  }

  /**
   * PING ACK echoing the 8 bytes at buf[at]: held for a later write of the connection, at most ACK_HOLD_MS (and at most
   * ACKS_HELD of them); the turn's flush decides which write it rides (`flush`). Held ACKs leave after the turn's
   * frames, so a grpc-go client reads the DATA before the ACK and does not PING for that DATA.
   */
  pingAck(buf: Buffer, at: number, windowBound: boolean): void {
    // A connection whose DATA waits for a window gets its ACK at once: the client times the round trip to size its
    // windows (grpc-go's BDP estimator grows them only from samples of tens of KB), and a late ACK would keep them
    // small. One that is not window-bound (a stream of events, however many) loses nothing by a longer sample.
    if (this.ackCount === ACKS_HELD || windowBound) {
      if (this.ackCount > 0) this.releaseAcks();
      const p = this.reserve(17);
      this.commit(writePingAck(this.segSlab, p, buf, at));
      return;
    }
    const acks = (this.acks ??= Buffer.allocUnsafe(8 * ACKS_HELD));
    buf.copy(acks, 8 * this.ackCount, at, at + 8);
    if (this.ackCount++ > 0) return;
    this.ackSince = performance.now();
    turn.held.push(this);
    turn.heldAt.push(this.ackSince);
    if (turn.ackTimer === undefined) {
      turn.ackTimer = setTimeout(ackTimerFired, ACK_HOLD_MS);
      turn.ackTimer.unref();
    }
  }

  /** Write the held PING ACKs (in the order they came). */
  releaseAcks(): void {
    const n = this.ackCount;
    this.ackCount = 0;
    this.ackSince = 0;
    if (n === 0 || this.closed) return;
    let q = this.reserve(17 * n);
    for (let i = 0; i < n; i++) q = writePingAck(this.segSlab, q, this.acks!, 8 * i);
    this.commit(q);
  }

  /** PING (not an ACK) with an 8-byte payload. */
  ping(payload: Buffer): void {
    const p = this.reserve(17);
    const q = frameHeader(this.segSlab, p, 8, PING, 0, 0);
    payload.copy(this.segSlab, q, 0, 8);
    this.commit(q + 8);
  }

  goaway(lastId: number, code: number, debug: string): void {
    const d = Buffer.from(debug.slice(0, 200), "utf8");
    const p = this.reserve(17 + d.length);
    this.commit(writeGoaway(this.segSlab, p, lastId, code, d));
  }
}
