/**
 * The exit hook's last resort for chromium: found by its profile through /proc, its whole
 * process group SIGKILLed and waited for. Real processes stand in for chromium: a group
 * leader started with --user-data-dir=<profile> and a child whose command line does not
 * name the profile (as chromium's zygote and renderers).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { chromiumTargets, killChromiumSync } from "../../src/report/html/chromium-procs.ts";

const running = (pid: number): boolean => {
  if (!existsSync(`/proc/${pid}/stat`)) return false;
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
};

describe("killChromiumSync", () => {
  it("kills the group of the process using the profile, its unnamed children too, and waits for them", async () => {
    const profile = `/nonexistent/memlane-chromium-test-${process.pid}/profile`;
    // The leader prints its child's pid; the child's command line does not name the profile.
    const leader = spawn(process.execPath, ["-e", `
      const c = require("node:child_process").spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
      console.log(c.pid); setInterval(() => {}, 1000);`, "--", `--user-data-dir=${profile}`], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
    const childPid = await new Promise<number>((resolve, reject) => {
      leader.stdout!.once("data", (d) => resolve(Number(String(d).trim())));
      leader.once("exit", (code) => reject(new Error(`the stand-in exited (${code}) before starting its child`)));
    });
    try {
      expect(chromiumTargets(profile).groups).toEqual(new Set([leader.pid]));
      expect(running(childPid)).toBe(true);
      expect(killChromiumSync(profile)).toBe(1);
      expect(running(childPid)).toBe(false);
      expect(running(leader.pid!)).toBe(false);
      expect(chromiumTargets(profile).groups.size).toBe(0);
    } finally {
      for (const pid of [childPid, leader.pid!]) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone, as it should be
        }
      }
    }
  });

  it("finds nothing and waits for nothing when no process uses the profile", () => {
    const t0 = Date.now();
    expect(killChromiumSync("/nonexistent/no-such-profile")).toBe(0);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
