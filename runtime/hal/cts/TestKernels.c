/*===- TestKernels.c - Kernels with the omni kernel ABI -------------------===//
//
// Built as a real shared object (OmniTestKernels) whose bytes the hal
// conformance tests and the executor tests embed as a step.bin executable,
// so that memfd + dlopen loading and Dispatch are exercised on genuine ELF
// code. ABI (docs/backend.md):
//   void k(int64_t begin, int64_t end, void **buffers, const int64_t *scalars)
//===----------------------------------------------------------------------===*/

#include <stdint.h>

/* buffers = {a, b, c}: c[i] = a[i] + b[i] (f32). */
void omni_test_add_f32(int64_t begin, int64_t end, void **buffers,
                       const int64_t *scalars) {
  const float *a = (const float *)buffers[0];
  const float *b = (const float *)buffers[1];
  float *c = (float *)buffers[2];
  (void)scalars;
  for (int64_t i = begin; i < end; ++i)
    c[i] = a[i] + b[i];
}

/* buffers = {x, y}, scalars = {factor, rowSize, row}: work item i writes
   y[row * rowSize + i] = x[i] * factor (f32), so a loop can fill one row of
   a stacked tensor per iteration. */
void omni_test_scale_row_f32(int64_t begin, int64_t end, void **buffers,
                             const int64_t *scalars) {
  const float *x = (const float *)buffers[0];
  float *y = (float *)buffers[1];
  const int64_t factor = scalars[0];
  const int64_t rowSize = scalars[1];
  const int64_t row = scalars[2];
  for (int64_t i = begin; i < end; ++i)
    y[row * rowSize + i] = x[i] * (float)factor;
}

/* buffers = {out}: out[i] = begin of the chunk that computed i (i64), so a
   test can see how [0, grid) was split. */
void omni_test_chunk_begin(int64_t begin, int64_t end, void **buffers,
                           const int64_t *scalars) {
  int64_t *out = (int64_t *)buffers[0];
  (void)scalars;
  for (int64_t i = begin; i < end; ++i)
    out[i] = begin;
}
