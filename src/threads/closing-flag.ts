/**
 * Whether a uWS thread's gateway is closing, read through `isClosing`. Every gateway a thread makes (its warm-up's and
 * its own) reads the flag through a closure made at this one place: V8's feedback for a call such as
 * `deps.isClosing()` in the REST router names the closures of one site, so the code the warm-up compiled keeps
 * serving the real gateway. With a closure of each gateway's own, the first real request deoptimized the router's
 * admission check ("wrong feedback cell").
 */
export class ClosingFlag {
  closing = false;
  readonly isClosing = (): boolean => this.closing;
}
