#include "cublas_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace memlane::cuda {

const CublasApi* load_cublas(std::string* why) {
  static std::once_flag once;
  static CublasApi api;
  static bool ok = false;
  static std::string error;
  std::call_once(once, [] {
    std::string tried;
    void* h = nullptr;
    const char* env = std::getenv("MEMLANE_CUBLAS");
    const char* names[] = {env, "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    for (const char* n : names) {
      if (!n || !*n) continue;
      h = dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (h) {
        api.library = n;
        break;
      }
      tried += tried.empty() ? n : std::string(", ") + n;
    }
    if (!h) {
      error = "cuBLAS not found (tried " + tried + "; set MEMLANE_CUBLAS to its path)";
      return;
    }
    auto sym = [&](const char* name) -> void* {
      void* p = dlsym(h, name);
      if (!p && error.empty()) error = api.library + " lacks " + name;
      return p;
    };
    api.create = reinterpret_cast<decltype(api.create)>(sym("cublasCreate_v2"));
    api.destroy = reinterpret_cast<decltype(api.destroy)>(sym("cublasDestroy_v2"));
    api.set_stream = reinterpret_cast<decltype(api.set_stream)>(sym("cublasSetStream_v2"));
    api.set_math_mode = reinterpret_cast<decltype(api.set_math_mode)>(sym("cublasSetMathMode"));
    api.set_workspace = reinterpret_cast<decltype(api.set_workspace)>(sym("cublasSetWorkspace_v2"));
    api.sgemm_strided_batched = reinterpret_cast<decltype(api.sgemm_strided_batched)>(
        sym("cublasSgemmStridedBatched"));
    api.gemm_strided_batched_ex = reinterpret_cast<decltype(api.gemm_strided_batched_ex)>(
        sym("cublasGemmStridedBatchedEx"));
    ok = error.empty();
  });
  if (!ok) {
    if (why) *why = error;
    return nullptr;
  }
  return &api;
}

}  // namespace memlane::cuda
