/**
 * Memory sizes as people write them on a command line or in a pipeline: "80MiB", "2GiB",
 * "1.5GB", "512K", or a bare number of MiB. The one parser of such text, in MiB (the unit
 * every report figure uses).
 */
const MIB_PER_UNIT: Readonly<Record<string, number>> = Object.freeze({
  b: 1 / 2 ** 20,
  k: 1 / 1024, kib: 1 / 1024, kb: 1e3 / 2 ** 20,
  m: 1, mib: 1, mb: 1e6 / 2 ** 20,
  g: 1024, gib: 1024, gb: 1e9 / 2 ** 20,
  t: 2 ** 20, tib: 2 ** 20, tb: 1e12 / 2 ** 20,
});

/** MiB in `text`; throws an Error naming the text and the accepted forms. */
export function parseSizeMiB(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m ? (m[2] || "mib").toLowerCase() : "";
  const factor = MIB_PER_UNIT[unit];
  if (!m || factor === undefined)
    throw new Error(`${JSON.stringify(text)} is not a memory size (expected a number with an optional unit: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; a bare number is MiB)`);
  return Number(m[1]) * factor;
}

/** A MiB figure for messages: "80.00 MiB", "2.00 GiB" from 1 GiB up. */
export function formatMiB(mib: number): string {
  return mib >= 1024 ? `${(mib / 1024).toFixed(2)} GiB` : `${mib.toFixed(2)} MiB`;
}
