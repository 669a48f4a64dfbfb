/**
 * Command-line parsing, done once per command at the entry point: a spec per command, a
 * parsed and frozen result, and UsageError naming the option, what was expected and what was
 * received.
 */
import { existsSync, statSync } from "node:fs";
import type { Io } from "./io.ts";

export type FlagType = "string" | "int" | "intList" | "list" | "boolean";

export interface FlagSpec {
  type: FlagType;
  short?: string;
  /** For `list`: allowed items; for `string`: allowed values. */
  choices?: readonly string[];
  /** Shown in --help. */
  description: string;
  placeholder?: string;
  default?: unknown;
  /** May be given several times: the parsed value is then the list of every occurrence's value. */
  repeat?: boolean;
}

export interface CommandSpec {
  name: string;
  summary: string;
  /** Positional arguments, in order; all required. */
  positionals: { name: string; description: string }[];
  flags: Record<string, FlagSpec>;
}

export interface ParsedArgs {
  positionals: Record<string, string>;
  flags: Record<string, unknown>;
  help: boolean;
}

/** A usage error: exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    readonly option?: string,
  ) {
    super(message);
  }
  static bad(option: string, expected: string, received: string): UsageError {
    return new UsageError(`${option}: expected ${expected}, received ${JSON.stringify(received)}`, option);
  }
}

function convert(flag: string, spec: FlagSpec, raw: string): unknown {
  switch (spec.type) {
    case "int": {
      if (!/^\d+$/.test(raw) || Number(raw) < 1) throw UsageError.bad(flag, "a positive integer", raw);
      return Number(raw);
    }
    case "intList": {
      const parts = raw.split(",");
      if (parts.some((p) => !/^\d+$/.test(p) || Number(p) < 1))
        throw UsageError.bad(flag, "a comma-separated list of positive integers (e.g. 1,64)", raw);
      return parts.map(Number);
    }
    case "list": {
      const parts = raw.split(",").filter((p) => p.length > 0);
      if (parts.length === 0) throw UsageError.bad(flag, "a comma-separated list", raw);
      for (const p of parts)
        if (spec.choices && !spec.choices.includes(p))
          throw UsageError.bad(flag, `a comma-separated list of ${spec.choices.join(", ")}`, raw);
      return [...new Set(parts)];
    }
    case "string":
      if (spec.choices && !spec.choices.includes(raw)) throw UsageError.bad(flag, `one of ${spec.choices.join(", ")}`, raw);
      if (raw === "") throw UsageError.bad(flag, "a non-empty value", raw);
      return raw;
    case "boolean":
      return true;
  }
}

export function parseArgs(spec: CommandSpec, argv: readonly string[]): ParsedArgs {
  const flags: Record<string, unknown> = {};
  const pos: string[] = [];
  let help = false;
  const byShort = new Map(Object.entries(spec.flags).flatMap(([n, f]) => (f.short ? [[f.short, n] as const] : [])));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--help" || arg === "-h") {
      help = true;
      continue;
    }
    if (arg === "--") {
      pos.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      pos.push(arg);
      continue;
    }
    let name: string | undefined;
    let inline: string | undefined;
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
      inline = eq >= 0 ? arg.slice(eq + 1) : undefined;
    } else {
      name = byShort.get(arg.slice(1));
      if (!name)
        throw new UsageError(
          `unknown option ${arg} for "memlane ${spec.name}" (expected one of ${flagList(spec)})`,
          arg,
        );
    }
    const f = spec.flags[name];
    const shown = arg.startsWith("--") ? `--${name}` : arg;
    if (!f) throw new UsageError(`unknown option ${shown} for "memlane ${spec.name}" (expected one of ${flagList(spec)})`, shown);
    if (f.type === "boolean") {
      if (inline !== undefined) throw UsageError.bad(shown, "no value (it is a switch)", inline);
      flags[name] = true;
      continue;
    }
    let raw = inline;
    if (raw === undefined) {
      raw = argv[i + 1];
      if (raw === undefined || (raw.startsWith("-") && raw.length > 1))
        throw new UsageError(`${shown}: expected a value (${f.placeholder ?? f.type}), received nothing`, shown);
      i++;
    }
    if (f.repeat) {
      flags[name] = [...((flags[name] as unknown[] | undefined) ?? []), convert(shown, f, raw)];
      continue;
    }
    if (name in flags) throw new UsageError(`${shown}: given more than once`, shown);
    flags[name] = convert(shown, f, raw);
  }
  for (const [n, f] of Object.entries(spec.flags)) if (!(n in flags) && f.default !== undefined) flags[n] = f.default;
  const positionals: Record<string, string> = {};
  if (!help) {
    if (pos.length < spec.positionals.length) {
      const missing = spec.positionals[pos.length]!;
      throw new UsageError(`missing <${missing.name}>: expected ${missing.description}, received nothing`, missing.name);
    }
    if (pos.length > spec.positionals.length)
      throw new UsageError(
        `unexpected argument ${JSON.stringify(pos[spec.positionals.length])}: "memlane ${spec.name}" takes ${spec.positionals.length} (${spec.positionals.map((p) => `<${p.name}>`).join(" ")})`,
      );
    spec.positionals.forEach((p, i) => (positionals[p.name] = pos[i]!));
  }
  return Object.freeze({ positionals: Object.freeze(positionals), flags: Object.freeze(flags), help });
}

function flagList(spec: CommandSpec): string {
  return [...Object.keys(spec.flags).map((n) => `--${n}`), "--help"].join(", ");
}

export function usage(spec: CommandSpec): string {
  const lines = [
    `Usage: memlane ${spec.name} ${spec.positionals.map((p) => `<${p.name}>`).join(" ")} [options]`,
    "",
    spec.summary,
    "",
  ];
  for (const p of spec.positionals) lines.push(`  <${p.name}>`.padEnd(28) + p.description);
  if (spec.positionals.length) lines.push("");
  lines.push("Options:");
  for (const [n, f] of Object.entries(spec.flags)) {
    const left = `  ${f.short ? `-${f.short}, ` : ""}--${n}${f.type === "boolean" ? "" : ` ${f.placeholder ?? "VALUE"}`}${f.repeat ? " ..." : ""}`;
    const def = f.default !== undefined ? ` (default ${Array.isArray(f.default) ? f.default.join(",") : String(f.default)})` : "";
    lines.push(left.padEnd(28) + f.description + def);
  }
  lines.push("  -h, --help".padEnd(28) + "show this help");
  return lines.join("\n");
}

/**
 * The arguments of a command on one `<model.onnx>` (compare, compile), with that file
 * checked to exist; null when --help was asked for (the usage is then printed).
 */
export function parseModelCommand(spec: CommandSpec, argv: readonly string[], io: Pick<Io, "out">): { args: ParsedArgs; model: string } | null {
  const args = parseArgs(spec, argv);
  if (args.help) {
    io.out(usage(spec));
    return null;
  }
  const model = args.positionals["model.onnx"]!;
  if (!existsSync(model)) throw UsageError.bad("<model.onnx>", "an existing ONNX file", model);
  if (!statSync(model).isFile()) throw UsageError.bad("<model.onnx>", "an ONNX file (not a directory)", model);
  return { args, model };
}
