/** The page's inline stylesheet: plain, printable, readable without the charts. */
export const STYLE = `
:root { --fg:#1d2330; --muted:#5a6270; --line:#d9dde3; --bg:#ffffff; --panel:#f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1180px; padding: 20px 28px 40px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.meta, .note { color: var(--muted); margin: 2px 0; }
.note { font-size: 12.5px; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, monospace; }
.gpu-unavailable { background: #fff6e0; border: 1px solid #f0d48a; padding: 6px 10px; border-radius: 4px; display: inline-block; }
section { margin-bottom: 8px; }
#timeline, #phases, #kinds, #latency { display: grid; grid-template-columns: 1fr 1fr; gap: 0 18px; }
#timeline > h2, #timeline > .note, #phases > h2, #phases > .note, #kinds > h2, #kinds > .note, #latency > h2, #latency > .note { grid-column: 1 / -1; }
#kinds > details { grid-column: 1 / -1; }
details.kinds summary { cursor: pointer; margin: 4px 0; }
td.files { font-size: 12px; color: var(--muted); white-space: normal; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; vertical-align: baseline; }
figure.chart { margin: 8px 0 14px; padding: 8px 10px; background: var(--panel); border: 1px solid var(--line); border-radius: 6px; min-width: 0; }
figure.chart-stages { grid-column: 1 / -1; }
figcaption { font-size: 12.5px; font-weight: 600; margin-bottom: 4px; }
.chart-box { position: relative; width: 100%; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13px; width: 100%; }
caption { caption-side: bottom; text-align: left; color: var(--muted); font-size: 12px; padding-top: 4px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td:nth-child(n+2) { font-variant-numeric: tabular-nums; }
td:first-child { white-space: nowrap; }
.status-ok { color: #1a7f37; } .status-failed { color: #cf222e; font-weight: 600; } .status-skipped, .status-cancelled { color: #9a6700; }
.backend-notes ul { margin: 0 0 12px; padding-left: 20px; font-size: 13px; }
.backend-notes .note { margin-top: 0; }
details.ratios summary { cursor: pointer; color: var(--muted); margin: 4px 0; }
@media (max-width: 900px) { #timeline, #phases, #kinds, #latency { grid-template-columns: 1fr; } }
`;
