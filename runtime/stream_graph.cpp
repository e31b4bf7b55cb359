// The graph: capture and replay on the CPU here, on CUDA through stream_graph_cuda.cpp.
#include "runtime/stream_graph.h"
#include "runtime/cpu_capture.h"
#include "runtime/op_hooks.h"

namespace moebench {

namespace detail {
void cuda_capture_begin(void* stream);
// Ends the capture on `stream` and instantiates it; throws Error (the capture discarded) if it broke.
void cuda_capture_end(void* stream, void** graph, void** exec, std::size_t* nodes);
void cuda_capture_abandon(void* stream);
void cuda_graph_launch(void* exec, void* stream);
void cuda_graph_destroy(void* graph, void* exec);
}  // namespace detail

namespace {
// This thread's captures, for the check on work run inline (runtime/inline_queue.h) and the
// trials an op may run (runtime/op_hooks.h).
struct CapturingThread {
  CapturingThread() { op_hooks::capture_opened(); }
  ~CapturingThread() { op_hooks::capture_closed(); }
};
}  // namespace

StreamGraph::StreamGraph(TrackingAllocator& alloc, const Stream& origin, const std::function<void()>& work)
    : backend_(origin.backend) {
  if (backend_ == Backend::cpu && !origin.queue)
    throw Error("StreamGraph: the default stream cannot be captured (it runs its work at once); capture a created stream");
  if (backend_ == Backend::cuda && !origin.handle)
    throw Error("StreamGraph: the legacy default stream cannot be captured; capture a created stream");
  memory_ = alloc.begin_capture();
  try {
    CapturingThread thread;
    if (backend_ == Backend::cpu) {
      cpu_ = std::make_unique<CpuCapture>(origin.queue);
      work();
      cpu_->end();
      nodes_ = cpu_->ops();
    } else {
      detail::cuda_capture_begin(origin.handle);
      try {
        work();
      } catch (...) {
        detail::cuda_capture_abandon(origin.handle);
        throw;
      }
      detail::cuda_capture_end(origin.handle, &cuda_graph_, &cuda_exec_, &nodes_);
    }
  } catch (...) {
    cpu_.reset();  // ends a CPU capture still open
    alloc.end_capture();
    throw;
  }
  alloc.end_capture();
}

StreamGraph::~StreamGraph() {
  if (last_replay_) {
    try {
      last_replay_->synchronize();
    } catch (...) {  // a failed replay: its error went to whoever synchronised its stream
    }
  }
  if (cuda_exec_ || cuda_graph_) detail::cuda_graph_destroy(cuda_graph_, cuda_exec_);
  memory_ = GraphPool{};  // the blocks go back once the replays are done
}

void StreamGraph::replay(const Stream& s) {
  if (s.backend != backend_) throw Error("StreamGraph: replayed on a stream of the other backend");
  if (backend_ == Backend::cpu) {
    if (!s.queue) throw Error("StreamGraph: replayed on the default stream; replay it on a created stream");
    cpu_->replay(s.queue);
  } else {
    detail::cuda_graph_launch(cuda_exec_, s.handle);
  }
  if (!last_replay_) last_replay_ = std::make_unique<Event>(backend_);
  last_replay_->record(s);
}

}  // namespace moebench
