/** Errors of the compiler and of the plan reader. Both carry the protocol's error code. */
import { ErrorCode } from "../transport/protocol.ts";

export type CompileErrorKind =
  | "unsupported-op"
  | "invalid-model"
  | "unreadable-model"
  | "shape"
  | "option"
  | "internal";

/** A model that cannot be compiled into a plan; the message names the file, node and op. */
export class CompileError extends Error {
  override readonly name = "CompileError";
  readonly code: number;
  constructor(
    message: string,
    readonly kind: CompileErrorKind,
    readonly details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.code = kind === "unsupported-op" ? ErrorCode.UNSUPPORTED_OP : kind === "shape" ? ErrorCode.SHAPE_MISMATCH : ErrorCode.INVALID_ARGUMENT;
  }
}

/** A plan file that fails validation; names the field, the expected and the found value. */
export class PlanError extends Error {
  override readonly name = "PlanError";
  readonly code = ErrorCode.PLAN_INVALID;
  constructor(
    readonly file: string,
    readonly field: string,
    readonly expected: string,
    readonly found: string,
  ) {
    super(`${file}: invalid plan: ${field}: expected ${expected}, found ${found}`);
  }
}
