import type { Suite } from "../lib/suite.js";
import type { Figure } from "../lib/schema.js";
import { brokerFanoutFigures } from "./broker-fanout.js";
import { deliveryLatencyFigures } from "./delivery-latency.js";
import { encodeFigures } from "./encode.js";
import { hotMessageFigures } from "../codec/hot-messages.js";
import { ringFigures } from "./ring.js";

/** The in-process tinybench suites: ring, SubscribeResponse encoding, hot-message codecs, broker fan-out, delivery latency. */
export const microSuite: Suite = {
  name: "micro",
  title: "In-process micro benchmarks (tinybench): ring buffer, SubscribeResponse encoding, proto-loader vs @bufbuild on the hot messages, broker fan-out, the delivery latency histogram's cost",
  budgetMs: { full: 60_000, quick: 15_000, "dry-run": 10_000 },
  async run({ mode, progress }) {
    const figures: Figure[] = [];
    progress.step("micro", "ring buffer push/pump");
    figures.push(...(await ringFigures(mode)));
    progress.step("micro", "encode one SubscribeResponse");
    figures.push(...(await encodeFigures(mode)));
    progress.step("micro", "hot messages: proto-loader vs @bufbuild (bench/codec/hot-messages.ts)");
    figures.push(...(await hotMessageFigures(mode)));
    figures.push(...(await brokerFanoutFigures(mode, (what) => progress.step("micro", what))));
    figures.push(...(await deliveryLatencyFigures(mode, (what) => progress.step("micro", what))));
    return figures;
  },
};
