// Trains for a long time: the failure tests kill its worker, or interrupt the CLI, mid-task.
import { pipeline } from "../../../src/index.ts";

export default pipeline("long-train")
  .train({ arch: "digits-cnn", epochs: 500, seed: 0 })
  .export();
