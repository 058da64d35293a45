import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { checkPromText } from "../support/prom-text.js";

/** An exposition Prometheus accepts without findings: every metric type, labels with escapes, a timestamp. */
export const GOOD = `# HELP demo_requests_total Requests served.
# TYPE demo_requests_total counter
demo_requests_total{route="/a",method="GET"} 3
demo_requests_total{route="/b \\"quoted\\" \\\\ \\n",method="GET"} 1 1700000000000
# HELP demo_temperature_celsius Current temperature.
# TYPE demo_temperature_celsius gauge
demo_temperature_celsius -1.5e-3
# HELP demo_latency_seconds Request latency.
# TYPE demo_latency_seconds histogram
demo_latency_seconds_bucket{route="/a",le="0.1"} 1
demo_latency_seconds_bucket{route="/a",le="1"} 2
demo_latency_seconds_bucket{route="/a",le="+Inf"} 3
demo_latency_seconds_sum{route="/a"} 4.2
demo_latency_seconds_count{route="/a"} 3
# HELP demo_size_bytes Sizes.
# TYPE demo_size_bytes summary
demo_size_bytes{quantile="0.5"} NaN
demo_size_bytes_sum 0
demo_size_bytes_count 0
`;

/** Broken expositions and the problem each must report (the rules promtool's parser and linter apply). */
const BAD: Array<{ what: string; text: string; problem: RegExp }> = [
  { what: "metric name starting with a digit", text: "1abc 1\n", problem: /invalid metric name "1abc"/ },
  { what: "label name with a dash", text: '# HELP x_total h\n# TYPE x_total counter\nx_total{a-b="1"} 1\n', problem: /invalid label name "a-b"/ },
  { what: "reserved label name", text: '# HELP x_total h\n# TYPE x_total counter\nx_total{__x="1"} 1\n', problem: /reserved/ },
  { what: "unquoted label value", text: "# HELP x_total h\n# TYPE x_total counter\nx_total{a=1} 1\n", problem: /not quoted/ },
  { what: "invalid escape", text: '# HELP x_total h\n# TYPE x_total counter\nx_total{a="\\t"} 1\n', problem: /invalid escape/ },
  { what: "unterminated label value", text: '# HELP x_total h\n# TYPE x_total counter\nx_total{a="1} 1\n', problem: /not terminated/ },
  { what: "label given twice", text: '# HELP x_total h\n# TYPE x_total counter\nx_total{a="1",a="2"} 1\n', problem: /label "a" given twice/ },
  { what: "value that is not a float", text: "# HELP x_total h\n# TYPE x_total counter\nx_total 1,5\n", problem: /not a float value/ },
  { what: "missing value", text: "# HELP x_total h\n# TYPE x_total counter\nx_total\n", problem: /expected "value \[timestamp\]"/ },
  { what: "non-integer timestamp", text: "# HELP x_total h\n# TYPE x_total counter\nx_total 1 1.5\n", problem: /timestamp "1.5"/ },
  { what: "duplicate series", text: '# HELP x_total h\n# TYPE x_total counter\nx_total{a="1"} 1\nx_total{a="1"} 2\n', problem: /duplicate series x_total\{a="1"\}/ },
  { what: "second HELP", text: "# HELP x_total h\n# HELP x_total h2\n# TYPE x_total counter\nx_total 1\n", problem: /second HELP/ },
  { what: "second TYPE", text: "# HELP x_total h\n# TYPE x_total counter\n# TYPE x_total counter\nx_total 1\n", problem: /second TYPE/ },
  { what: "TYPE after a sample", text: "# HELP x_total h\nx_total 1\n# TYPE x_total counter\n", problem: /TYPE after the family's first sample/ },
  { what: "unknown type", text: "# HELP x h\n# TYPE x meter\nx 1\n", problem: /unknown type "meter"/ },
  { what: "interleaved families", text: "# HELP a h\n# TYPE a gauge\na 1\n# HELP b h\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n", problem: /a: line 7: lines of this family are not together/ },
  { what: "no trailing newline", text: "# HELP a h\n# TYPE a gauge\na 1", problem: /does not end with a newline/ },
  { what: "negative counter", text: "# HELP x_total h\n# TYPE x_total counter\nx_total -1\n", problem: /negative/ },
  {
    what: "histogram buckets that decrease",
    text: '# HELP h_seconds h\n# TYPE h_seconds histogram\nh_seconds_bucket{le="1"} 5\nh_seconds_bucket{le="2"} 4\nh_seconds_bucket{le="+Inf"} 5\nh_seconds_sum 1\nh_seconds_count 5\n',
    problem: /count 4 is below the previous bucket's 5/,
  },
  {
    what: "histogram buckets out of order",
    text: '# HELP h_seconds h\n# TYPE h_seconds histogram\nh_seconds_bucket{le="2"} 1\nh_seconds_bucket{le="1"} 1\nh_seconds_bucket{le="+Inf"} 1\nh_seconds_sum 1\nh_seconds_count 1\n',
    problem: /does not follow le=2 in ascending order/,
  },
  {
    what: "histogram without a +Inf bucket",
    text: '# HELP h_seconds h\n# TYPE h_seconds histogram\nh_seconds_bucket{le="1"} 1\nh_seconds_sum 1\nh_seconds_count 1\n',
    problem: /no le="\+Inf" bucket/,
  },
  {
    what: "histogram whose +Inf bucket differs from _count",
    text: '# HELP h_seconds h\n# TYPE h_seconds histogram\nh_seconds_bucket{le="+Inf"} 2\nh_seconds_sum 1\nh_seconds_count 3\n',
    problem: /le="\+Inf" bucket 2 differs from _count 3/,
  },
  { what: "histogram without _sum", text: '# HELP h_seconds h\n# TYPE h_seconds histogram\nh_seconds_bucket{le="+Inf"} 1\nh_seconds_count 1\n', problem: /no _sum/ },
  { what: "histogram bucket without le", text: "# HELP h_seconds h\n# TYPE h_seconds histogram\nh_seconds_bucket 1\nh_seconds_sum 1\nh_seconds_count 1\n", problem: /without an "le" label/ },
  { what: "summary quantile out of range", text: '# HELP s_seconds h\n# TYPE s_seconds summary\ns_seconds{quantile="2"} 1\ns_seconds_sum 1\ns_seconds_count 1\n', problem: /quantile label in 0..1/ },
  { what: "family without help text", text: "# TYPE g gauge\ng 1\n", problem: /g no help text/ },
  { what: "counter without _total", text: "# HELP c h\n# TYPE c counter\nc 1\n", problem: /counter metrics should have "_total" suffix/ },
  { what: "gauge with _total", text: "# HELP g_total h\n# TYPE g_total gauge\ng_total 1\n", problem: /non-counter metrics should not have "_total" suffix/ },
  { what: "camelCase name", text: "# HELP requestCount h\n# TYPE requestCount gauge\nrequestCount 1\n", problem: /snake_case/ },
  { what: "non-base unit", text: "# HELP d_milliseconds h\n# TYPE d_milliseconds gauge\nd_milliseconds 1\n", problem: /use base unit/ },
];

describe("Prometheus text checker (test support)", () => {
  it("accepts a well-formed exposition with every metric type and reads its samples", () => {
    const { problems, families } = checkPromText(GOOD);
    assert.deepEqual(problems, []);
    assert.deepEqual([...families.keys()], ["demo_requests_total", "demo_temperature_celsius", "demo_latency_seconds", "demo_size_bytes"]);
    const req = families.get("demo_requests_total")!;
    assert.equal(req.type, "counter");
    assert.equal(req.help, "Requests served.");
    assert.deepEqual(req.samples[1]!.labels, { route: '/b "quoted" \\ \n', method: "GET" });
    assert.equal(families.get("demo_temperature_celsius")!.samples[0]!.value, -0.0015);
    assert.equal(families.get("demo_latency_seconds")!.samples.length, 5);
  });

  for (const { what, text, problem } of BAD) {
    it(`reports ${what}`, () => {
      const { problems } = checkPromText(text);
      assert.ok(problems.some((p) => problem.test(p)), `expected a problem matching ${problem}, got ${JSON.stringify(problems)}`);
    });
  }
});
