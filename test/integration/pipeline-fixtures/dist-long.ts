// Trains for a long time on 2 DDP ranks: the failure test kills one rank mid-epoch.
import { pipeline } from "../../../src/index.ts";

export default pipeline("dist-long", { threads: 1 })
  // retries 0 = the launcher's --max-restarts 0: a killed rank fails the stage.
  .train({ arch: "digits-cnn", epochs: 500, seed: 0, retries: 0, distributed: { nproc: 2, strategy: "ddp" } });
