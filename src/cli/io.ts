/** Where a command writes: injectable so that tests capture output. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** Whether stdout is a terminal (progress bars are drawn only then). */
  isTTY: boolean;
  /** Rewrites the current terminal line (progress bars); only called when isTTY. */
  redraw(line: string): void;
  columns: number;
}

export function defaultIo(): Io {
  const tty = process.stdout.isTTY === true;
  let dirty = false;
  const clear = (): void => {
    if (dirty) process.stdout.write("\r\x1b[2K");
    dirty = false;
  };
  return {
    out: (l) => {
      clear();
      process.stdout.write(`${l}\n`);
    },
    err: (l) => {
      clear();
      process.stderr.write(`${l}\n`);
    },
    isTTY: tty,
    redraw: (l) => {
      process.stdout.write(`\r\x1b[2K${l}`);
      dirty = true;
    },
    columns: process.stdout.columns ?? 120,
  };
}
