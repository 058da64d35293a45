import type { Subscription, SubscriptionMessage } from "../../src/client/index.js";

/** The next message of a subscription's iterator, or a rejection naming `what` after `timeoutMs`. */
export async function nextMessage(it: AsyncIterator<SubscriptionMessage>, what: string, timeoutMs = 5000): Promise<SubscriptionMessage> {
  let t: NodeJS.Timeout | undefined;
  try {
    const r = await Promise.race([
      it.next(),
      new Promise<never>((_, rej) => (t = setTimeout(() => rej(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs))),
    ]);
    if (r.done) throw new Error(`the subscription ended while waiting for ${what}`);
    return r.value;
  } finally {
    clearTimeout(t);
  }
}

/**
 * `p`, or a rejection naming `what` after `timeoutMs`. For waits a client bug could make endless (a refused
 * subscription that reconnects for ever instead of ending): the test then fails in seconds with a clear message
 * rather than at the test runner's timeout minutes later.
 */
export async function within<T>(p: Promise<T>, what: string, timeoutMs = 5000): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, rej) => (t = setTimeout(() => rej(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs)))]);
  } finally {
    clearTimeout(t);
  }
}

/** Resolve when `sub` emits `event` (first argument), or reject after `timeoutMs`. */
export function onceWithin<T>(sub: Subscription, event: string, timeoutMs = 10000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => {
      sub.off(event, on);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for the "${event}" event`));
    }, timeoutMs);
    const on = (v: T): void => {
      clearTimeout(t);
      resolve(v);
    };
    sub.once(event, on);
  });
}

