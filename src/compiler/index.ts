/** Public surface of the plan compiler (re-exported from src/index.ts). */
export { compileOnnx, compileGraph, COMPILER_VERSION, type CompileOptions, type CompileSummary, type ProfileSummary } from "./compile.ts";
export { CompileError, PlanError } from "./errors.ts";
export { readPlan, parsePlan, weightData, type PlanFile } from "./read.ts";
export { PLAN_MAGIC, PLAN_VERSION, PLAN_ALIGNMENT, type PlanHeader, type PlanTensor, type PlanOp } from "./plan-format.ts";
export { SUPPORTED_OPS } from "./supported.ts";
export { formatPlan } from "./inspect.ts";
export { checkPlanArena } from "./verify.ts";
