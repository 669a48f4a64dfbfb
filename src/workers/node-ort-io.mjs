// The multi-input form of the node-ort thread (docs/worker-tasks.md, "Several inputs and
// outputs"): eval inputs arrive batch first, one per graph input in its own dtype; a batch of
// n rows is cut from each (tiled when the eval set is smaller), its batch axis moved to where
// the model has it, and every output is handed back batch first. Plain JavaScript, like the
// thread body.

const prod = (xs) => xs.reduce((a, b) => a * b, 1);

function allocLike(data, n) {
  return new data.constructor(n);
}

/**
 * Rows [start, start + n) of a batch-first array, wrapping around. Rows that lie in one piece
 * are a view, as the single-input form's batches are: a copy per call left up to 31 MiB of
 * garbage at the steady-inference mark (a 128 MiB eval set at batch 8), collected or not by
 * then (docs/memory.md, "node-ort in a process of its own").
 */
function rows(data, shape, n, start) {
  const total = shape[0];
  const per = prod(shape.slice(1));
  if (start + n <= total) return data.subarray(start * per, (start + n) * per);
  const out = allocLike(data, n * per);
  for (let i = 0; i < n; i++) {
    const s = (start + i) % total;
    out.set(data.subarray(s * per, (s + 1) * per), i * per);
  }
  return out;
}

/** Batch-first [n, ...rest] → the batch at `axis` of rest-with-batch. */
function batchTo(data, shape, axis) {
  if (axis <= 0) return data;
  const [n, ...rest] = shape;
  const outer = prod(rest.slice(0, axis));
  const inner = prod(rest.slice(axis));
  const out = allocLike(data, data.length);
  for (let b = 0; b < n; b++)
    for (let o = 0; o < outer; o++) out.set(data.subarray((b * outer + o) * inner, (b * outer + o + 1) * inner), (o * n + b) * inner);
  return out;
}

/** The batch at `axis` of `dims` → batch first. */
function batchFrom(data, dims, axis) {
  if (axis <= 0) return data;
  const n = dims[axis];
  const outer = prod(dims.slice(0, axis));
  const inner = prod(dims.slice(axis + 1));
  const out = allocLike(data, data.length);
  for (let o = 0; o < outer; o++)
    for (let b = 0; b < n; b++) out.set(data.subarray((o * n + b) * inner, (o * n + b + 1) * inner), (b * outer + o) * inner);
  return out;
}

const sameDims = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);

/** Checks every spec'd input has its eval tensor, of its dtype and non-batch dims; returns them by name. */
export function checkFeeds(io, feeds) {
  const byName = new Map(feeds.map((f) => [f.name, f]));
  for (const spec of io.inputs) {
    const f = byName.get(spec.name);
    const want = spec.batchAxis < 0 ? spec.shape : spec.shape.filter((_, k) => k !== spec.batchAxis);
    const got = f ? (spec.batchAxis < 0 ? f.shape : f.shape.slice(1)) : null;
    if (!f || f.dtype !== spec.dtype || !sameDims(want, got))
      throw Object.assign(
        new Error(`input "${spec.name}": expected ${spec.dtype} [N, ${want.join(", ")}], received ${f ? `${f.dtype} [${f.shape.join(", ")}]` : "no tensor"}`),
        { code: 12 },
      );
  }
  return byName;
}

/** The feeds of one call at batch n from row `start`: ort tensors in the model's layout. */
export function feedsAt(ort, io, byName, n, start = 0) {
  const out = {};
  for (const spec of io.inputs) {
    const f = byName.get(spec.name);
    if (spec.batchAxis < 0) {
      out[spec.name] = new ort.Tensor(spec.dtype, f.data, spec.shape);
      continue;
    }
    const batchFirst = [n, ...f.shape.slice(1)];
    const data = batchTo(rows(f.data, f.shape, n, start), batchFirst, spec.batchAxis);
    out[spec.name] = new ort.Tensor(spec.dtype, data, spec.shape.map((d, k) => (k === spec.batchAxis ? n : d)));
  }
  return out;
}

/** Concatenates each output's chunks batch first; an output without batch is taken from the first chunk. */
export function gatherOutputs(io, chunks) {
  return io.outputs.map((spec) => {
    const parts = chunks.map((res) => {
      const t = res[spec.name];
      if (!t) throw new Error(`the session returned no output "${spec.name}"`);
      return t;
    });
    const type = parts[0].type;
    if (spec.batchAxis < 0) return { name: spec.name, dtype: type, shape: [...parts[0].dims], data: parts[0].data };
    const moved = parts.map((t) => batchFrom(t.data, t.dims, spec.batchAxis));
    const rest = parts[0].dims.filter((_, k) => k !== spec.batchAxis);
    const n = parts.reduce((a, t) => a + t.dims[spec.batchAxis], 0);
    const data = allocLike(moved[0], moved.reduce((a, m) => a + m.length, 0));
    let off = 0;
    for (const m of moved) {
      data.set(m, off);
      off += m.length;
    }
    return { name: spec.name, dtype: type, shape: [n, ...rest], data };
  });
}
