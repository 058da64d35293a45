import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseRfc3339, TIMESTAMP_MAX_SECONDS, TIMESTAMP_MIN_SECONDS } from "../../src/shared/rfc3339.js";

describe("parseRfc3339", () => {
  it("names the instant Date.parse names for a date-time that exists, to the nanosecond", () => {
    for (const t of ["1970-01-01T00:00:00Z", "2000-02-29T12:00:00+05:30", "1969-12-31T23:59:59-00:01", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1600-02-29T00:00:00Z"]) {
      assert.equal(parseRfc3339(t)!.seconds, Date.parse(t) / 1000, t);
    }
    assert.deepEqual(parseRfc3339("2024-02-29T23:30:00.000000001-01:00"), { seconds: Date.parse("2024-03-01T00:30:00Z") / 1000, nanos: 1 });
    assert.equal(parseRfc3339("0001-01-01T00:00:00Z")!.seconds, TIMESTAMP_MIN_SECONDS);
    assert.equal(parseRfc3339("9999-12-31T23:59:59Z")!.seconds, TIMESTAMP_MAX_SECONDS);
  });

  it("refuses a day, hour, minute, second or offset that does not exist instead of rolling it over", () => {
    for (const t of ["2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-13-01T00:00:00Z", "2024-00-10T00:00:00Z", "2024-01-00T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z", "2024-01-01T00:00:60Z", "2024-01-01T00:00:00+24:00", "2024-01-01 00:00:00Z"]) {
      assert.equal(parseRfc3339(t), undefined, t);
    }
  });
});
