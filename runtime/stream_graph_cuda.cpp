// The graph's CUDA side: stream capture into a cudaGraph, instantiated once, launched per replay.
// Thread-local capture mode: work this thread puts on the legacy stream, or a synchronisation it
// attempts, fails the capture instead of running (the allocator relaxes it around cudaMalloc).
#include <cstddef>
#include <string>
#include "kernels/exec.h"
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#include "kernels/cuda_check.cuh"
#include "runtime/cuda_stream.h"
#endif

namespace moebench::detail {

#if MOEBENCH_WITH_CUDA
void cuda_capture_begin(void* stream) {
  MOEBENCH_CUDA_CHECK(cudaStreamBeginCapture(cuda_stream(stream), cudaStreamCaptureModeThreadLocal));
}

void cuda_capture_abandon(void* stream) {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(cuda_stream(stream), &graph);  // an invalidated capture reports its error here: the work's own is thrown
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

void cuda_capture_end(void* stream, void** graph_out, void** exec_out, std::size_t* nodes) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(cuda_stream(stream), &graph);
  if (ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw Error(std::string("graph capture: ") + cudaGetErrorString(ended) +
                " (the captured work waited on the host, used the legacy stream, or left a forked stream unjoined)");
  }
  std::size_t count = 0;
  MOEBENCH_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {
    cudaGraphDestroy(graph);
    cudaGetLastError();
    throw Error(std::string("graph capture: instantiating the graph failed: ") + cudaGetErrorString(made));
  }
  MOEBENCH_CUDA_CHECK(cudaGraphUpload(exec, cuda_stream(stream)));  // the first replay pays no upload
  *graph_out = graph;
  *exec_out = exec;
  *nodes = count;
}

void cuda_graph_launch(void* exec, void* stream) {
  MOEBENCH_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), cuda_stream(stream)));
}

void cuda_graph_destroy(void* graph, void* exec) {
  if (exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  if (graph) cudaGraphDestroy(static_cast<cudaGraph_t>(graph));
}
#else
void cuda_capture_begin(void*) { cuda_not_built("StreamGraph"); }
void cuda_capture_abandon(void*) {}
void cuda_capture_end(void*, void**, void**, std::size_t*) { cuda_not_built("StreamGraph"); }
void cuda_graph_launch(void*, void*) { cuda_not_built("StreamGraph"); }
void cuda_graph_destroy(void*, void*) {}
#endif

}  // namespace moebench::detail
