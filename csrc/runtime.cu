// runtime.cu: the library's state and plumbing: errors, the stream, device
// facts, memory handles, copies, events, the copy-bandwidth probe, random
// fills for the benchmarks, and the test-only fault launchers.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "common.cuh"
#include "philox.cuh"

namespace sv {
namespace {

char g_error[1024] = "no error";
cudaStream_t g_stream = nullptr;
int g_device = -1;
int g_sms = 0;
void *g_ws = nullptr;
size_t g_ws_bytes = 0;
std::vector<cudaEvent_t> g_events;
unsigned *g_counters = nullptr;
int g_counters_n = 0;
// A dry run (sv_dry_run): launchers record the variants they would launch.
bool g_dry_run = false;
uint64_t g_variants = 0;

bool sticky(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

int need_init() {
  if (!g_stream) return set_error(SV_ERR_INVALID, "sv_init has not been called");
  return SV_OK;
}

__global__ void fill_u32_kernel(uint32_t *p, uint32_t v, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = v;
}

__global__ void delay_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// random_kernel writes normal values (Box-Muller on Philox words) times scale.
template <typename T>
__global__ void random_kernel(T *p, uint64_t n, uint64_t seed, float scale) {
  for (uint64_t b = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; 2 * b < n;
       b += (uint64_t)gridDim.x * blockDim.x) {
    const uint4 w = philox_block((uint32_t)seed, (uint32_t)(seed >> 32),
                                 make_uint4((uint32_t)b, (uint32_t)(b >> 32), 0x5eed, 0));
    const float u1 = open_u01(w.x), u2 = u01(w.y);
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    p[2 * b] = from_f32<T>(r * c * scale);
    if (2 * b + 1 < n) p[2 * b + 1] = from_f32<T>(r * s * scale);
  }
}

__global__ void out_of_bounds_kernel(int *p) { p[(size_t)1 << 40] = 1; }

__global__ void spin_kernel(volatile int *flag) {
  while (*flag == 0) {
  }
}

}  // namespace

int set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  return status;
}

int cuda_status(cudaError_t err, const char *what) {
  int status = SV_ERR_CUDA;
  if (sticky(err))
    status = SV_ERR_STICKY;
  else if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || err == cudaErrorInvalidDevice)
    status = SV_ERR_NO_DEVICE;
  return set_error(status, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

cudaStream_t stream() { return g_stream; }
int device_sms() { return g_sms > 0 ? g_sms : 1; }

bool skip_launch(int variant) {
  if (!g_dry_run) return false;
  g_variants |= 1ull << variant;
  return true;
}

bool pdl_supported() {
  static const bool yes = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return false;
    }
    return major >= 9;
  }();
  return yes;
}

int workspace(size_t bytes, void **out) {
  if (bytes == 0) bytes = 256;
  if (bytes > g_ws_bytes) {
    // Earlier launches on the stream may still use the old buffer.
    cudaError_t err = cudaStreamSynchronize(g_stream);
    if (err != cudaSuccess) return cuda_status(err, "workspace: synchronize");
    if (g_ws) cudaFree(g_ws);
    g_ws = nullptr;
    g_ws_bytes = 0;
    const size_t want = (bytes + (1 << 20) - 1) & ~(size_t)((1 << 20) - 1);
    err = cudaMalloc(&g_ws, want);
    if (err != cudaSuccess) return cuda_status(err, "workspace: allocate");
    g_ws_bytes = want;
  }
  *out = g_ws;
  return SV_OK;
}

int counters(int n, unsigned **out) {
  if (n > g_counters_n) {
    cudaError_t err = cudaStreamSynchronize(g_stream);
    if (err != cudaSuccess) return cuda_status(err, "counters: synchronize");
    if (g_counters) cudaFree(g_counters);
    g_counters = nullptr;
    g_counters_n = 0;
    const int want = (n + 1023) & ~1023;
    err = cudaMalloc(&g_counters, sizeof(unsigned) * (size_t)want);
    if (err == cudaSuccess) err = cudaMemsetAsync(g_counters, 0, sizeof(unsigned) * (size_t)want, g_stream);
    if (err != cudaSuccess) return cuda_status(err, "counters: allocate");
    g_counters_n = want;
  }
  *out = g_counters;
  return SV_OK;
}

}  // namespace sv

using namespace sv;

extern "C" int sv_abi_version(void) { return SV_ABI_VERSION; }

extern "C" const char *sv_last_error(void) { return g_error; }

extern "C" int sv_init(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return set_error(SV_ERR_NO_DEVICE, "no CUDA device: %s", cudaGetErrorString(err));
  if (device < 0 || device >= count)
    return set_error(SV_ERR_NO_DEVICE, "no CUDA device %d (%d present)", device, count);
  if (g_stream) return device == g_device ? SV_OK : set_error(SV_ERR_INVALID, "already bound to device %d", g_device);
  err = cudaSetDevice(device);
  if (err != cudaSuccess) return cuda_status(err, "set device");
  err = cudaFree(nullptr);  // create the context now, not inside the first timed launch
  if (err != cudaSuccess) return cuda_status(err, "create context");
  err = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) return cuda_status(err, "create stream");
  err = cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return cuda_status(err, "device attributes");
  g_device = device;
  return SV_OK;
}

extern "C" int sv_device_count(int *count) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) return set_error(SV_ERR_NO_DEVICE, "no CUDA device: %s", cudaGetErrorString(err));
  if (count) *count = n;
  return SV_OK;
}

extern "C" int sv_device_info(char *name, int name_len, int *sms, uint64_t *memory_bytes, uint64_t *l2_bytes,
                              int *cc_major, int *cc_minor) {
  int st = need_init();
  if (st != SV_OK) return st;
  cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, g_device);
  if (err != cudaSuccess) return cuda_status(err, "device properties");
  if (name && name_len > 0) {
    strncpy(name, prop.name, (size_t)name_len - 1);
    name[name_len - 1] = 0;
  }
  if (sms) *sms = prop.multiProcessorCount;
  if (memory_bytes) *memory_bytes = prop.totalGlobalMem;
  if (l2_bytes) *l2_bytes = (uint64_t)prop.l2CacheSize;
  if (cc_major) *cc_major = prop.major;
  if (cc_minor) *cc_minor = prop.minor;
  return SV_OK;
}

extern "C" int sv_malloc(uint64_t bytes, uint64_t *handle) {
  int st = need_init();
  if (st != SV_OK) return st;
  void *p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
  if (err != cudaSuccess) return cuda_status(err, "allocate device memory");
  *handle = reinterpret_cast<uint64_t>(p);
  return SV_OK;
}

extern "C" int sv_free(uint64_t handle) {
  if (!handle) return SV_OK;
  cudaError_t err = cudaFree(reinterpret_cast<void *>(handle));
  if (err != cudaSuccess) return cuda_status(err, "free device memory");
  return SV_OK;
}

extern "C" int sv_memcpy_htod(uint64_t dst, const void *src, uint64_t bytes) {
  int st = need_init();
  if (st != SV_OK || bytes == 0) return st;
  cudaError_t err = cudaMemcpyAsync(reinterpret_cast<void *>(dst), src, bytes, cudaMemcpyHostToDevice, g_stream);
  if (err != cudaSuccess) return cuda_status(err, "copy to device");
  return SV_OK;
}

extern "C" int sv_memcpy_dtoh(void *dst, uint64_t src, uint64_t bytes) {
  int st = need_init();
  if (st != SV_OK || bytes == 0) return st;
  cudaError_t err = cudaMemcpyAsync(dst, reinterpret_cast<const void *>(src), bytes, cudaMemcpyDeviceToHost, g_stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(g_stream);
  if (err != cudaSuccess) return cuda_status(err, "copy to host");
  return SV_OK;
}

extern "C" int sv_memcpy_dtod(uint64_t dst, uint64_t src, uint64_t bytes) {
  int st = need_init();
  if (st != SV_OK || bytes == 0) return st;
  cudaError_t err = cudaMemcpyAsync(reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), bytes,
                                    cudaMemcpyDeviceToDevice, g_stream);
  if (err != cudaSuccess) return cuda_status(err, "copy on device");
  return SV_OK;
}

extern "C" int sv_fill_u32(uint64_t dst, uint32_t value, uint64_t count) {
  int st = need_init();
  if (st != SV_OK || count == 0) return st;
  const uint64_t blocks = std::min<uint64_t>((count + 255) / 256, 4096);
  fill_u32_kernel<<<(unsigned)blocks, 256, 0, g_stream>>>(reinterpret_cast<uint32_t *>(dst), value, count);
  return check_launch("fill");
}

extern "C" int sv_host_register(void *ptr, uint64_t bytes) {
  int st = need_init();
  if (st != SV_OK) return st;
  cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return set_error(SV_ERR_CUDA, "pin host memory: %s", cudaGetErrorString(err));
  }
  return SV_OK;
}

extern "C" int sv_host_unregister(void *ptr) {
  cudaError_t err = cudaHostUnregister(ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return set_error(SV_ERR_CUDA, "unpin host memory: %s", cudaGetErrorString(err));
  }
  return SV_OK;
}

extern "C" int sv_synchronize(void) {
  int st = need_init();
  if (st != SV_OK) return st;
  cudaError_t err = cudaStreamSynchronize(g_stream);
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_status(err, "kernel");
  return SV_OK;
}

extern "C" int sv_events_reserve(int n) {
  int st = need_init();
  if (st != SV_OK) return st;
  if (n < 0) return set_error(SV_ERR_INVALID, "negative event count");
  while ((int)g_events.size() < n) {
    cudaEvent_t ev;
    cudaError_t err = cudaEventCreate(&ev);
    if (err != cudaSuccess) return cuda_status(err, "create event");
    g_events.push_back(ev);
  }
  return SV_OK;
}

extern "C" int sv_event_record(int i) {
  if (i < 0 || i >= (int)g_events.size()) return set_error(SV_ERR_INVALID, "event %d not reserved", i);
  cudaError_t err = cudaEventRecord(g_events[i], g_stream);
  if (err != cudaSuccess) return cuda_status(err, "record event");
  return SV_OK;
}

extern "C" int sv_event_elapsed(int i, int j, float *ms) {
  if (i < 0 || j < 0 || i >= (int)g_events.size() || j >= (int)g_events.size())
    return set_error(SV_ERR_INVALID, "events %d, %d not reserved", i, j);
  cudaError_t err = cudaEventSynchronize(g_events[j]);
  if (err == cudaSuccess) err = cudaEventElapsedTime(ms, g_events[i], g_events[j]);
  if (err != cudaSuccess) return cuda_status(err, "event time");
  return SV_OK;
}

extern "C" int sv_delay(uint64_t ns) {
  int st = need_init();
  if (st != SV_OK) return st;
  delay_kernel<<<1, 1, 0, g_stream>>>(ns);
  return check_launch("delay");
}

extern "C" int sv_copy_bandwidth(uint64_t bytes, int iters, double *bytes_per_second) {
  int st = need_init();
  if (st != SV_OK) return st;
  if (bytes < 1024 || iters < 1) return set_error(SV_ERR_INVALID, "copy bandwidth: %llu bytes, %d iterations",
                                                 (unsigned long long)bytes, iters);
  void *a = nullptr, *b = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  std::vector<float> ms;
  cudaError_t err = cudaMalloc(&a, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&b, bytes);
  if (err == cudaSuccess) err = cudaEventCreate(&e0);
  if (err == cudaSuccess) err = cudaEventCreate(&e1);
  if (err == cudaSuccess) err = cudaMemsetAsync(a, 0x3c, bytes, g_stream);
  for (int it = -2; it < iters && err == cudaSuccess; it++) {  // two warm-up copies
    err = cudaEventRecord(e0, g_stream);
    if (err == cudaSuccess) err = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g_stream);
    if (err == cudaSuccess) err = cudaEventRecord(e1, g_stream);
    if (err == cudaSuccess) err = cudaEventSynchronize(e1);
    float t = 0;
    if (err == cudaSuccess) err = cudaEventElapsedTime(&t, e0, e1);
    if (err == cudaSuccess && it >= 0) ms.push_back(t);
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (a) cudaFree(a);
  if (b) cudaFree(b);
  if (err != cudaSuccess) return cuda_status(err, "copy bandwidth");
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  *bytes_per_second = 2.0 * (double)bytes / (med * 1e-3);
  return SV_OK;
}

extern "C" int sv_fill_random(uint64_t dst, int dtype, uint64_t count, uint64_t seed, float scale) {
  int st = need_init();
  if (st != SV_OK || count == 0) return st;
  const uint64_t blocks = std::min<uint64_t>((count / 2 + 256) / 256, 8192);
  SV_DISPATCH_DTYPE(dtype, T,
                    random_kernel<T><<<(unsigned)blocks, 256, 0, g_stream>>>(reinterpret_cast<T *>(dst), count,
                                                                             seed, scale));
  return check_launch("random fill");
}

extern "C" int sv_fault_out_of_bounds(void) {
  int st = need_init();
  if (st != SV_OK) return st;
  out_of_bounds_kernel<<<1, 1, 0, g_stream>>>(reinterpret_cast<int *>(0x1000));
  return check_launch("fault: out of bounds");
}

extern "C" int sv_fault_spin(void) {
  int st = need_init();
  if (st != SV_OK) return st;
  int *flag = nullptr;
  void *ws = nullptr;
  st = workspace(256, &ws);
  if (st != SV_OK) return st;
  flag = static_cast<int *>(ws);
  cudaError_t err = cudaMemsetAsync(flag, 0, sizeof(int), g_stream);
  if (err != cudaSuccess) return cuda_status(err, "fault: spin");
  spin_kernel<<<1, 1, 0, g_stream>>>(flag);
  return check_launch("fault: spin");
}

extern "C" int sv_dry_run(int on, uint64_t *variants) {
  if (on) {
    int st = need_init();
    if (st != SV_OK) return st;
    g_variants = 0;
  } else if (variants) {
    *variants = g_variants;
  }
  g_dry_run = on != 0;
  return SV_OK;
}
