/*===- FakeLibcuda.c - A pretend libcuda for the cuda driver's tests ------===*
 *
 * Exports cuGetProcAddress_v2 the way libcuda does, so that CudaDriverTest
 * can reach each of CudaApi::load's one-line errors on a machine without a
 * GPU. Behaviour comes from the environment (read at each call):
 *   OMNI_FAKE_CUDA_VERSION  cuDriverGetVersion's value (default 12040)
 *   OMNI_FAKE_CUDA_INIT     cuInit's CUresult (default 0)
 *   OMNI_FAKE_CUDA_DEVICES  cuDeviceGetCount's value (default 1)
 * Every other entry point exists and fails with CUDA_ERROR_NOT_SUPPORTED
 * (801); the tests never get far enough to call one.
 *
 *===----------------------------------------------------------------------===*/

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

int cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                        unsigned long long flags, int *symbolStatus) {
  (void)cudaVersion;
  (void)flags;
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
