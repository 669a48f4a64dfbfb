// 2 DDP ranks with one launcher restart allowed (retries 1 = --max-restarts 1).
import { pipeline } from "../../../src/index.ts";

export default pipeline("dist-restart", { threads: 1 })
  .train({ arch: "digits-cnn", epochs: 4, seed: 0, retries: 1, distributed: { nproc: 2, strategy: "ddp" } });
