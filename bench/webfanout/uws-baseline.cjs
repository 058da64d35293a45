// Bare uWebSockets.js topic server, the baseline of bench/webfanout.ts (same method as the peers harness'
// node/uws-pubsub.cjs): WebSocket /sub speaks the gateway's subscribe frame ({"op":"subscribe","topics":[...]}) and
// answers {"op":"subscribed",...}; every message on /pub is published verbatim to TOPIC with uWS's native
// app.publish and acknowledged with "ok". Plain CommonJS run by node itself, so the measured pid is this process.
// Prints {"port": n} once listening; exits on SIGTERM.
"use strict";
const uWS = require("uWebSockets.js");
if (!Function.prototype.toString.call(uWS.App).includes("[native code]")) {
  console.error("uWebSockets.js fell back to its JS shim: not benchmarking that");
  process.exit(1);
}
const TOPIC = process.env.TOPIC || "bench.web";
const app = uWS.App();
const common = { compression: uWS.DISABLED, maxPayloadLength: 64 * 1024, idleTimeout: 120, maxBackpressure: 1 << 20 };
app.ws("/sub", {
  ...common,
  message: (ws, msg) => {
    let m;
    try {
      m = JSON.parse(Buffer.from(msg).toString("utf8"));
    } catch {
      return;
    }
    if (m && m.op === "subscribe" && Array.isArray(m.topics)) {
      for (const t of m.topics) ws.subscribe(String(t));
      ws.send(JSON.stringify({ op: "subscribed", topics: m.topics, recovered: false }), false);
    }
  },
});
app.ws("/pub", {
  ...common,
  message: (ws, msg, isBinary) => {
    app.publish(TOPIC, msg, isBinary);
    ws.send("ok", false);
  },
});
app.listen("127.0.0.1", 0, (tok) => {
  if (!tok) {
    console.error("listen failed");
    process.exit(1);
  }
  process.stdout.write(JSON.stringify({ port: uWS.us_socket_local_port(tok) }) + "\n");
});
process.on("SIGTERM", () => process.exit(0));
