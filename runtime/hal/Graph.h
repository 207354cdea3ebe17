//===- Graph.h - A captured sequence of stream commands ---------*- C++ -*-===//
//
// Stream::beginCapture ... Stream::endCapture records the commands submitted
// in between into a Graph instead of running them; Stream::launchGraph runs
// them again, as one submission, as often as needed (a CUDA graph: one
// launch instead of one cuLaunchKernel per command). The executor captures
// a Loop command whose body only enqueues device work (the rollout's
// denoise loop) and replays it on later runs (docs/backend.md, "Graphs").
//
// What a capture fixes: every captured command's buffer ranges, executable,
// kernel, grid, scalars, parameters and fill pattern, and the bytes of a
// captured writeBuffer, as they were at the call. A launch repeats exactly
// that; the buffers' contents are read and written at launch time.
//
// Ownership: the stream that captured it returns it; the caller owns it.
// The device, and every buffer and executable its commands name, must
// outlive it. A graph may be launched on any stream of the device that
// captured it, one launch at a time per graph.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_GRAPH_H
#define OMNI_RUNTIME_HAL_GRAPH_H

#include <cstdint>

namespace omni::hal {

class Graph {
public:
  virtual ~Graph() = default;

  /// How many commands were captured (for reports and tests).
  virtual int64_t numCommands() const = 0;
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_GRAPH_H
