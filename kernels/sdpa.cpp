// The fused attention's entry points (kernels/sdpa.h): checks, the workspace's layout, and the
// dispatch to cuDNN or to the graph's evaluation on the CPU.
#include "kernels/sdpa.h"
#include <algorithm>
#include <memory>
#include <string>
#include <vector>
#include "kernels/host_widen.h"

namespace moebench {

namespace {

constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Elements from a [sequence, head, row, column] tensor's first to its last.
std::size_t extent(const SdpaShape& s, const std::array<std::int64_t, 4>& strides) {
  const std::array<std::int64_t, 4> dims{s.sequences, s.heads, s.seq, s.head_dim};
  std::int64_t e = 1;
  for (int i = 0; i < 4; ++i) e += (dims[i] - 1) * strides[i];
  return std::size_t(e);
}

std::size_t stats_elements(const SdpaShape& s) { return std::size_t(s.sequences) * s.heads * s.seq; }

void require_supported(const Exec& ex, const SdpaShape& s, const char* name) {
  if (const std::string why = sdpa_unsupported(ex, s); !why.empty()) throw Error(std::string(name) + ": " + why);
}

// Runs `g` on the CPU: the caller's tensors widened to fp32, their outputs narrowed back. Tensors
// whose elements interleave (Q, K and V in one buffer of rows) share one widened copy, so that
// narrowing one output does not write back stale copies of another's elements.
void evaluate_on_host(const SdpaShape& s, const SdpaGraph& g, const std::vector<const void*>& memory, void* dq_accum) {
  struct Span {
    const char* begin;
    const char* end;
    DType t;
    std::vector<int> tensors;
    bool written = false;
    std::unique_ptr<WidenedView> view;
  };
  const bool backward = g.d_o >= 0;
  const std::vector<int> outputs = backward ? std::vector<int>{g.dq, g.dk, g.dv} : std::vector<int>{g.o, g.stats};
  std::vector<Span> spans;
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    if (!memory[i]) continue;
    const int t = int(i);
    const DType type = t == g.stats ? DType::f32 : s.t;
    const std::size_t n = t == g.stats ? stats_elements(s) : extent(s, t == g.o || t == g.d_o ? s.o_strides : s.strides);
    const char* begin = static_cast<const char*>(memory[i]);
    Span mine{begin, begin + n * dtype_size(type), type, {t}, false, nullptr};
    for (auto it = spans.begin(); it != spans.end();) {  // absorb every span this one overlaps
      if (it->t == type && it->begin < mine.end && mine.begin < it->end) {
        mine.begin = std::min(mine.begin, it->begin), mine.end = std::max(mine.end, it->end);
        mine.tensors.insert(mine.tensors.end(), it->tensors.begin(), it->tensors.end());
        it = spans.erase(it);
      } else {
        ++it;
      }
    }
    spans.push_back(std::move(mine));
  }
  std::vector<float*> widened(g.tensors.size(), nullptr);
  for (Span& sp : spans) {
    const std::size_t es = dtype_size(sp.t);
    sp.view = std::make_unique<WidenedView>(sp.begin, sp.t, std::size_t(sp.end - sp.begin) / es, true);
    for (int t : sp.tensors) {
      widened[t] = sp.view->data() + (static_cast<const char*>(memory[t]) - sp.begin) / es;
      sp.written = sp.written || std::find(outputs.begin(), outputs.end(), t) != outputs.end();
    }
  }
  evaluate_sdpa_graph(g, [&](int i) { return i == g.dq_accum ? static_cast<float*>(dq_accum) : widened[i]; });
  for (Span& sp : spans)
    if (sp.written) sp.view->narrow();
}

void run(const Exec& ex, const SdpaShape& s, const SdpaGraph& g, const char* name, std::vector<const void*> memory,
         void* workspace) {
  require_supported(ex, s, name);
  void* dq_accum = g.dq_accum >= 0 ? workspace : nullptr;
  if (ex.backend == Backend::cuda) {
    if (dq_accum) memory[g.dq_accum] = dq_accum;
    return sdpa_cudnn_run(g, const_cast<void* const*>(memory.data()),
                          static_cast<char*>(workspace) + aligned(g.dq_accum_bytes()), ex.stream);
  }
  run_host(ex, name, [s, g, memory, dq_accum] {
    // cuDNN adds the dQ products into its accumulator, which is zeroed before each run
    if (dq_accum) std::fill_n(static_cast<float*>(dq_accum), g.dq_accum_bytes() / sizeof(float), 0.f);
    evaluate_on_host(s, g, memory, dq_accum);
  });
}

}  // namespace

std::string sdpa_unsupported(const Exec& ex, const SdpaShape& s) {
  if (ex.backend == Backend::cpu) return "";
  if (!sdpa_cudnn_built()) return "this build has no cuDNN (the fused attention's engines); configure with cuDNN 9 found";
  if (s.t != DType::f16 && s.t != DType::bf16)
    return "cuDNN's fused attention takes fp16 or bf16, not " + std::string(dtype_name(s.t));
  if (s.head_dim % 8 != 0 || s.head_dim > 128)
    return "cuDNN's fused attention takes head dims that are multiples of 8 up to 128, not " + std::to_string(s.head_dim);
  return "";
}

std::size_t sdpa_forward_workspace(const Exec& ex, const SdpaShape& s) {
  require_supported(ex, s, "sdpa_forward_workspace");
  if (ex.backend == Backend::cpu) return 0;
  return sdpa_cudnn_workspace(sdpa_forward_graph(s), ex.stream);
}

std::size_t sdpa_backward_workspace(const Exec& ex, const SdpaShape& s) {
  require_supported(ex, s, "sdpa_backward_workspace");
  const SdpaGraph g = sdpa_backward_graph(s);
  const std::size_t accum = aligned(g.dq_accum_bytes());
  return ex.backend == Backend::cpu ? accum : accum + sdpa_cudnn_workspace(g, ex.stream);
}

void sdpa_forward(const Exec& ex, const SdpaShape& s, const void* q, const void* k, const void* v, void* o, float* stats,
                  void* workspace) {
  const SdpaGraph g = sdpa_forward_graph(s);
  std::vector<const void*> memory(g.tensors.size(), nullptr);
  memory[g.q] = q, memory[g.k] = k, memory[g.v] = v, memory[g.o] = o, memory[g.stats] = stats;
  run(ex, s, g, "sdpa_forward", std::move(memory), workspace);
}

void sdpa_backward(const Exec& ex, const SdpaShape& s, const void* q, const void* k, const void* v, const void* o,
                   const void* d_o, const float* stats, void* dq, void* dk, void* dv, void* workspace) {
  const SdpaGraph g = sdpa_backward_graph(s);
  std::vector<const void*> memory(g.tensors.size(), nullptr);
  memory[g.q] = q, memory[g.k] = k, memory[g.v] = v, memory[g.o] = o, memory[g.d_o] = d_o, memory[g.stats] = stats;
  memory[g.dq] = dq, memory[g.dk] = dk, memory[g.dv] = dv;
  run(ex, s, g, "sdpa_backward", std::move(memory), workspace);
}

#if !MOEBENCH_WITH_CUDNN
bool sdpa_cudnn_built() { return false; }
std::size_t sdpa_cudnn_workspace(const SdpaGraph&, void*) { throw Error("sdpa: this build has no cuDNN"); }
void sdpa_cudnn_run(const SdpaGraph&, void* const*, void*, void*) { throw Error("sdpa: this build has no cuDNN"); }
std::vector<long long> sdpa_cudnn_engines(const SdpaGraph&, const std::string&) { throw Error("sdpa: this build has no cuDNN"); }
std::string sdpa_cudnn_device_json() { throw Error("sdpa: this build has no cuDNN"); }
#endif

}  // namespace moebench
