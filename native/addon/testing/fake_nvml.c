/* A stand-in for libnvidia-ml.so.1, for tests on machines without a driver. One device
 * ("Fake GPU", 16 GiB, 1 GiB used); compute processes: the calling process (getpid(), so no
 * environment is needed) using 300 MiB and pid 1 with NVML_VALUE_NOT_AVAILABLE; graphics:
 * the same pid again with 300 MiB (a C+G process, counted once). Built a second time with
 * FAKE_NVML_FOREIGN, it lists a pid that does not exist here instead of the caller (NVML
 * speaking another pid namespace). The compute query exports _v3; the graphics query only
 * _v2, so the addon's fallback runs. */
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef void* nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} info_t;

static int dev_token;
static unsigned fake_pid(void) {
#ifdef FAKE_NVML_FOREIGN
  return 4194301u; /* below the largest pid_max (2^22), never allocated in a test run */
#else
  return (unsigned)getpid();
#endif
}
nvmlReturn_t nvmlInit_v2(void) { return 0; }
const char* nvmlErrorString(nvmlReturn_t rc) { return rc ? "Fake Error" : "Success"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char* b, unsigned n) { strncpy(b, "0.0-fake", n); return 0; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) { *n = 1; return 0; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *d = &dev_token;
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* b, unsigned n) { (void)d; strncpy(b, "Fake GPU", n); return 0; }
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* b, unsigned n) { (void)d; strncpy(b, "GPU-fake-0000", n); return 0; }
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  (void)d;
  m->total = 16ULL << 30; m->used = 1ULL << 30; m->free = m->total - m->used;
  return 0;
}
static nvmlReturn_t fill(unsigned* count, info_t* out, int graphics) {
  unsigned need = graphics ? 1 : 2;
  if (*count < need) { *count = need; return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */ }
  memset(out, 0, sizeof(info_t) * need);
  out[0].pid = fake_pid(); out[0].usedGpuMemory = 300ULL << 20;
  if (!graphics) { out[1].pid = 1; out[1].usedGpuMemory = ~0ULL; }
  *count = need;
  return 0;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* c, info_t* o) { (void)d; return fill(c, o, 0); }
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned* c, info_t* o) { (void)d; return fill(c, o, 1); }
