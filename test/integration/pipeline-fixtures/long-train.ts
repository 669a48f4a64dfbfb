// Trains for a long time: the failure tests kill its worker, or interrupt the CLI, mid-task.
import { pipeline } from "../../../src/index.ts";

export default pipeline("long-train")
  // No retry: a killed worker must fail the run here (test/fault covers retries).
  .train({ arch: "digits-cnn", epochs: 500, seed: 0, retries: 0 })
  .export();
