// A step's work captured once and replayed with one launch. On CUDA it is a CUDA graph (stream
// capture, instantiated once); on the CPU, the ops the streams' queues were given
// (runtime/cpu_capture.h), replayed onto the same queues. Nothing runs while capturing. What
// `work` enqueues on `origin` becomes the graph, and so does what it enqueues on any stream that
// joins by waiting for an event recorded in the capture; every such stream must be joined back
// into `origin` before `work` returns. Inside, nothing may wait on the host (a stream or event
// synchronisation, a read-back): on either backend that is an error. Buffers allocated on the
// captured streams come from the graph's own pool (GraphPool): a replay writes the same
// addresses again. Host values read when the work is enqueued are frozen into the graph, so
// whatever changes from one step to the next (an optimizer's step count) must live on the device;
// and every buffer the work touches must outlive the graph.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include "runtime/allocator.h"
#include "runtime/stream.h"

namespace moebench {

class CpuCapture;

class StreamGraph {
 public:
  // Throws Error (the capture abandoned, nothing run) if `work` throws or breaks a rule above.
  StreamGraph(TrackingAllocator& alloc, const Stream& origin, const std::function<void()>& work);
  ~StreamGraph();  // waits for the last replay, then gives the graph's blocks back to the pool
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  // Enqueues one run of the graph on `s`, after its earlier work; its later work follows it.
  void replay(const Stream& s);
  // The graph's nodes: kernels, copies and the like on CUDA; ops on the CPU (event records and
  // waits are edges there, not nodes).
  std::size_t nodes() const { return nodes_; }

 private:
  Backend backend_;
  GraphPool memory_;
  std::unique_ptr<CpuCapture> cpu_;
  void* cuda_graph_ = nullptr;  // cudaGraph_t
  void* cuda_exec_ = nullptr;   // cudaGraphExec_t
  std::size_t nodes_ = 0;
  std::unique_ptr<Event> last_replay_;
};

}  // namespace moebench
