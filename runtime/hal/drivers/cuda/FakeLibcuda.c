/*===- FakeLibcuda.c - A pretend libcuda for the cuda driver's tests ------===*
 *
 * Exports cuGetProcAddress_v2 the way libcuda does, so that CudaDriverTest
 * can reach each of CudaApi::load's one-line errors on a machine without a
 * GPU. Behaviour comes from the environment (read at each call):
 *   OMNI_FAKE_CUDA_VERSION  cuDriverGetVersion's value (default 12040)
 *   OMNI_FAKE_CUDA_INIT     cuInit's CUresult (default 0)
 *   OMNI_FAKE_CUDA_DEVICES  cuDeviceGetCount's value (default 1)
 * Every other entry point exists and fails with CUDA_ERROR_NOT_SUPPORTED
 * (801); the tests never get far enough to call one. As libcuda's, the
 * lookup takes base names only (cuda.h: "for the driver API cuMemAlloc_v2,
 * symbol would be cuMemAlloc"): a versioned or per-thread name
 * ("cuStreamBeginCapture_v2", "..._ptsz") is CUDA_ERROR_NOT_FOUND (500),
 * so that loading the fake checks CudaApi never asks for one.
 *
 *===----------------------------------------------------------------------===*/

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int envInt(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

static int fakeDriverGetVersion(int *version) {
  *version = envInt("OMNI_FAKE_CUDA_VERSION", 12040);
  return 0;
}

static int fakeInit(unsigned flags) {
  (void)flags;
  return envInt("OMNI_FAKE_CUDA_INIT", 0);
}

static int fakeDeviceGetCount(int *count) {
  *count = envInt("OMNI_FAKE_CUDA_DEVICES", 1);
  return 0;
}

static int fakeNotSupported(void) { return 801; }

static int endsWith(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int isVersionedName(const char *symbol) {
  const char *v = strrchr(symbol, '_');
  if (endsWith(symbol, "_ptsz") || endsWith(symbol, "_ptds"))
    return 1;
  /* _v2, _v3, ...: an underscore, 'v', then digits only. */
  if (!v || v[1] != 'v' || v[2] == 0)
    return 0;
  for (v += 2; *v; ++v)
    if (*v < '0' || *v > '9')
      return 0;
  return 1;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                        unsigned long long flags, int *symbolStatus) {
  (void)cudaVersion;
  (void)flags;
  if (isVersionedName(symbol)) {
    *pfn = NULL;
    if (symbolStatus)
      *symbolStatus = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 500;
  }
  if (strcmp(symbol, "cuDriverGetVersion") == 0)
    *pfn = (void *)fakeDriverGetVersion;
  else if (strcmp(symbol, "cuInit") == 0)
    *pfn = (void *)fakeInit;
  else if (strcmp(symbol, "cuDeviceGetCount") == 0)
    *pfn = (void *)fakeDeviceGetCount;
  else
    *pfn = (void *)fakeNotSupported;
  if (symbolStatus)
    *symbolStatus = 0;
  return 0;
}
