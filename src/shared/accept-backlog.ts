import { readFileSync } from "node:fs";

/**
 * Connections the kernel queues for a listening port before the gateway accepts them, per process and port
 * (`--accept-backlog`). Linux's own default cap (net.core.somaxconn) and what Go servers ask for. When a replica
 * fails, its clients reconnect to the others at once: a queue of Node's default 511 (or uWS's fixed 512) overflows,
 * and every SYN the kernel drops costs its client a one-second retransmit (docs/operations.md, "Accept queue").
 */
export const DEFAULT_ACCEPT_BACKLOG = 4096;

/** The kernel's cap on one listening socket's queue (net.core.somaxconn; 4096 when it cannot be read). */
export function somaxconn(): number {
  try {
    const n = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : DEFAULT_ACCEPT_BACKLOG;
  } catch {
    return DEFAULT_ACCEPT_BACKLOG;
  }
}
