// Preloaded (`node --expose-gc -r ...`) into every server process bench/webfanout.ts measures (the gateway and the
// bare uWS baseline alike): on SIGUSR2 it runs a full garbage collection and writes process.memoryUsage() as JSON to
// $BENCH_MEM_FILE. The bench samples idle memory right after, so the figure is what stays live per subscriber, not
// garbage from connection setup that the next collection would free (which made single runs vary 2x).
"use strict";
const fs = require("node:fs");
const file = process.env.BENCH_MEM_FILE;
if (typeof globalThis.gc === "function" && file) {
  process.on("SIGUSR2", () => {
    globalThis.gc();
    globalThis.gc();
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()));
    fs.renameSync(`${file}.tmp`, file);
  });
}
