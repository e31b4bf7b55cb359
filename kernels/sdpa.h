// Fused causal attention (kernels/sdpa_graph.h's graphs): the forward writes O and each row's
// log-sum-exp statistic, the backward dQ, dK and dV from them; no [seq, seq] tensor is stored.
// On CUDA the graphs run through cuDNN's fused attention engines (kernels/sdpa_cudnn.cpp), which
// take fp16/bf16 tensors and head dims that are multiples of 8 up to 128. On the CPU the same
// graphs are evaluated op by op: a check of what the GPU runs, not a fast path.
#pragma once
#include <cstddef>
#include <string>
#include <vector>
#include "kernels/exec.h"
#include "kernels/sdpa_graph.h"

namespace moebench {

// Why `ex` cannot run the fused attention at shape `s`, or "" when it can.
std::string sdpa_unsupported(const Exec& ex, const SdpaShape& s);
// The device memory one call needs besides its tensors (the caller's, lent for the call).
std::size_t sdpa_forward_workspace(const Exec& ex, const SdpaShape& s);
std::size_t sdpa_backward_workspace(const Exec& ex, const SdpaShape& s);

// q, k, v, o: [sequence, head, row, column] by s.strides; stats: fp32 [sequences, heads, seq].
void sdpa_forward(const Exec& ex, const SdpaShape& s, const void* q, const void* k, const void* v, void* o, float* stats,
                  void* workspace);
// d_o in, dq, dk, dv out (overwritten), all by s.strides.
void sdpa_backward(const Exec& ex, const SdpaShape& s, const void* q, const void* k, const void* v, const void* o,
                   const void* d_o, const float* stats, void* dq, void* dk, void* dv, void* workspace);

// The cuDNN side (kernels/sdpa_cudnn.cpp): `pointers[i]` is tensor i's memory (by-value scalars
// and virtual tensors: nullptr).
bool sdpa_cudnn_built();
std::size_t sdpa_cudnn_workspace(const SdpaGraph& g, void* stream);
void sdpa_cudnn_run(const SdpaGraph& g, void* const* pointers, void* workspace, void* stream);
// Deviceless (cuDNN 9.8+; kernels/sdpa_cudnn_deviceless.cpp): the global indices of the engines
// cuDNN's heuristics offer for `g` on the GPU that `device_json` (cuDNN's serialized device
// properties) describes and whose plans build up to loading their kernels, best first; empty
// when no engine takes the graph there. No GPU needed.
std::vector<long long> sdpa_cudnn_engines(const SdpaGraph& g, const std::string& device_json);
// This GPU's properties as cuDNN serializes them: what sdpa_cudnn_engines reads.
std::string sdpa_cudnn_device_json();

}  // namespace moebench
