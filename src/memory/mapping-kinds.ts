/**
 * What a mapping is: the one place that turns a path (or pseudo-name) of /proc/<pid>/smaps
 * into a kind of memory (docs/memory.md, "Where the RAM goes"). Workers only read and sum per
 * path; every runtime's mappings are classified here, so the kinds mean the same thing for
 * python-torch, python-ort, node-ort and memlane-rt.
 *
 * Kinds: one per library package (`lib:torch`, `lib:onnxruntime`, `lib:CUDA`, `lib:python`,
 * ...: shared objects and executables, grouped by the package that ships them), then `heap`
 * (the main thread's malloc arena), `arenas` (the other threads' malloc arenas), `anonymous`,
 * `stacks`, `model-files` (mmap'd weights: ONNX, plans, checkpoints), `shm`
 * (/dev/shm segments), `gpu-driver` (/dev/nvidia* mappings: pinned buffers and driver
 * state, where the driver maps them through its device files) and `other`.
 */
import { ANON, ANON_ARENA, ANON_GUARDED } from "./smaps.ts";

export type MappingKind =
  | `lib:${string}`
  | "heap"
  | "anonymous"
  | "arenas"
  | "stacks"
  | "model-files"
  | "shm"
  | "gpu-driver"
  | "other";

export interface MappingClass {
  kind: MappingKind;
  /** Human label: "torch libs", "thread stacks", ... */
  label: string;
}

const FIXED: Record<Exclude<MappingKind, `lib:${string}`>, string> = {
  heap: "heap",
  anonymous: "anonymous",
  arenas: "malloc arenas (threads)",
  stacks: "thread stacks",
  "model-files": "model & plan files",
  shm: "/dev/shm segments",
  "gpu-driver": "GPU driver mappings",
  other: "other",
};

/** Label of a kind id (also for ids read back from a report). */
export function kindLabel(kind: string): string {
  if (kind.startsWith("lib:")) return `${kind.slice(4)} libs`;
  return FIXED[kind as keyof typeof FIXED] ?? kind;
}

const cls = (kind: MappingKind): MappingClass => ({ kind, label: kindLabel(kind) });
const lib = (pkg: string): MappingClass => cls(`lib:${pkg}`);

/** mmap'd weights: ONNX models and their external data, memlane plans, checkpoints, TensorRT engines. */
const MODEL_FILE = /\.(onnx|onnx\.data|mlplan|pt|pth|ckpt|safetensors|engine|trt)$/i;
/** Shared objects (libfoo.so, libfoo.so.1.2, numpy's *.cpython-311-x86_64-linux-gnu.so) and Node addons. */
const SHARED_OBJECT = /\.so(\.[\w.]+)?$|\.node$/;
/** Names of the NVIDIA driver's and the CUDA toolkit's libraries, wherever they are installed. */
const CUDA_LIB = /^lib(cuda|cudart|cublas|cublasLt|cudnn\w*|cufft\w*|curand|cusparse\w*|cusolver\w*|nvrtc\w*|nvJitLink|nvToolsExt|nvidia-[\w-]+|nccl|cupti|nvperf\w*|nvblas)[.-]/;
const TENSORRT_LIB = /^lib(nvinfer\w*|nvonnxparser|nvparsers)[.-]/;

/** Package names as their directory spells them → the name the report uses. */
const PACKAGE_ALIASES: Record<string, string> = {
  nvidia: "CUDA",
  pyzmq: "zmq",
  zeromq: "zmq",
  "onnxruntime-node": "onnxruntime",
  "onnxruntime-common": "onnxruntime",
  "onnxruntime-gpu": "onnxruntime",
  tensorrt: "TensorRT",
  tensorrt_libs: "TensorRT",
};

/** The package directory a path lives in: site-packages/<pkg>/, <pkg>.libs/, node_modules/[@scope/]<pkg>/. */
function packageDir(path: string): string | null {
  const py = /\/(?:site|dist)-packages\/([^/]+)\//.exec(path);
  if (py) return py[1]!.replace(/\.libs$/, "").replace(/-[\d.]+\.dist-info$/, "");
  const nodeMod = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//g;
  let last: string | null = null;
  for (let m = nodeMod.exec(path); m !== null; m = nodeMod.exec(path)) last = m[1]!;
  return last;
}

function libraryPackage(path: string, base: string): string {
  if (CUDA_LIB.test(base) || /\/cuda[\w.-]*\//.test(path)) return "CUDA";
  if (TENSORRT_LIB.test(base)) return "TensorRT";
  const pkg = packageDir(path);
  if (pkg !== null) return PACKAGE_ALIASES[pkg] ?? pkg;
  if (/^(python\d[\d.]*|libpython\d)/.test(base) || path.includes("/lib-dynload/")) return "python";
  if (base === "node" || base.startsWith("libnode.so")) return "node";
  if (base === "memlane-rt" || base.startsWith("libmemlane") || base.startsWith("memlane") || path.includes("/native/build/")) return "memlane";
  if (/^lib(openblas|blas|lapack|cblas)/.test(base)) return "OpenBLAS";
  if (base.startsWith("libzmq")) return "zmq";
  if (base.startsWith("libonnxruntime")) return "onnxruntime";
  if (base.startsWith("libtorch") || base.startsWith("libc10")) return "torch";
  return "system";
}

/** Executables memlane runs: their text and data count as the runtime's own library code. */
const EXECUTABLE = /^(python\d[\d.]*|node|memlane-rt)$/;

/** Classifies one path or pseudo-name of a smaps summary. */
export function classifyMapping(rawPath: string): MappingClass {
  const path = rawPath.replace(/ \(deleted\)$/, "");
  if (path === "[heap]") return cls("heap");
  if (path === ANON_ARENA) return cls("arenas");
  if (path === "[stack]" || path === ANON_GUARDED || path.startsWith("[stack:")) return cls("stacks");
  if (path === ANON || path.startsWith("[anon:") || path.startsWith("[anon_shmem:") || path.startsWith("/memfd:") || path === "/dev/zero")
    return cls("anonymous"); // memfd and MAP_SHARED|MAP_ANONYMOUS ("/dev/zero (deleted)"): anonymous memory with a file's name
  if (path.startsWith("/SYSV")) return cls("shm"); // System V shared memory
  if (path.startsWith("[")) return cls("other"); // [vdso], [vvar], [vsyscall]
  if (path.startsWith("/dev/shm/")) return cls("shm");
  if (path.startsWith("/dev/nvidia")) return cls("gpu-driver");
  if (MODEL_FILE.test(path)) return cls("model-files");
  const base = path.slice(path.lastIndexOf("/") + 1);
  if (SHARED_OBJECT.test(base) || EXECUTABLE.test(base)) return lib(libraryPackage(path, base));
  return cls("other");
}
