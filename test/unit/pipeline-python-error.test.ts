import { describe, expect, it } from "vitest";
import { pythonError } from "../../src/workers/python-bridge.ts";

describe("python stage errors", () => {
  it("turns pythonia's empty-message exception into the Python error and its traceback", () => {
    const e = new Error("");
    e.stack = "*** PY ***  Python Error  Call to 'exec' failed:\n>  await exec(code)\n\n... across the bridge ...\n\n  at <module> (<string>:3)\n*** JS *** IndexError: index 10 is out of bounds";
    const out = pythonError(e) as Error & { traceback: string };
    expect(out.message).toBe("python: IndexError: index 10 is out of bounds");
    expect(out.traceback).toContain("at <module> (<string>:3)");
    expect(out.cause).toBe(e);
  });

  it("leaves other errors alone", () => {
    const e = new Error("plain");
    expect(pythonError(e)).toBe(e);
    expect(pythonError("x")).toBe("x");
  });
});
