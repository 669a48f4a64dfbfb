#!/usr/bin/env node
// The `memlane` command: registers tsx (the orchestrator is TypeScript run from source), then
// hands over to src/cli/main.ts.
import { register } from "tsx/esm/api";

register();
const { runCli } = await import("../src/cli/main.ts");
await runCli(process.argv.slice(2));
