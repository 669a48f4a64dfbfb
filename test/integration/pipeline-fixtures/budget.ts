// A pipeline whose python-ort budget cannot hold (1 MiB of RSS) beside one that does: the
// end-to-end test of declared budgets (test/integration/budgets.test.ts).
import { pipeline } from "../../../src/index.ts";

export default pipeline("budget", { batchSizes: [1], iterations: 3, warmup: 1 })
  .export({ zoo: "digits-cnn" })
  .benchmark("python-ort", { budget: { rssMiB: 1, ussMiB: 100_000 } });
