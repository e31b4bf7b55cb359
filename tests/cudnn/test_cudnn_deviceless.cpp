// cuDNN's engines against the fused attention's graphs, on an H100 that is not here: the graphs
// are lowered without a GPU and cuDNN's heuristics are asked, for the device h100_device.json
// describes, which engines take them (kernels/sdpa_cudnn_deviceless.cpp). Heuristics offer only
// engines whose support check passed, so this is the GPU's first answer -- does any engine take
// the graph -- given on the CPU. What it cannot say is whether the kernels then run right: the
// GPU tests (GpuFusedAttention) say that.
//
// h100_device.json is cuDNN 9.19's schema of device properties filled in with the H100 80GB
// HBM3's published properties (132 SMs, 50 MB of L2, as the lent H100 reported them), written
// by hand: replace it with the one a lease writes (cudnn_device.json, serialized by the GPU).
#include <gtest/gtest.h>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include "kernels/sdpa.h"

namespace moebench {
namespace {

std::string h100() {
  std::ifstream f(MOEBENCH_H100_DEVICE_JSON);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Q, K, V interleaved in the QKV rows and O in the context rows, as the layer binds them; or, with
// `head_major`, every tensor [heads, tokens, d].
SdpaShape shape(int sequences, int heads, int seq, int d, DType t, bool head_major = false) {
  const long long inner = (long long)heads * d, width = 3 * inner, tokens = (long long)sequences * seq;
  SdpaShape s;
  s.sequences = sequences, s.heads = heads, s.seq = seq, s.head_dim = d, s.t = t;
  s.scale = 1.f / std::sqrt(float(d));
  s.strides = head_major ? std::array<std::int64_t, 4>{seq * d, tokens * d, d, 1} : std::array<std::int64_t, 4>{seq * width, d, width, 1};
  s.o_strides = head_major ? s.strides : std::array<std::int64_t, 4>{seq * inner, d, inner, 1};
  return s;
}

TEST(CudnnDeviceless, EnginesTakeTheForwardAndBackwardGraphsOnAnH100) {
  const std::string device = h100();
  ASSERT_FALSE(device.empty()) << MOEBENCH_H100_DEVICE_JSON;
  struct Case {
    const char* what;
    SdpaShape s;
  };
  for (const Case& c : {Case{"GPT-3 Medium's step, bf16", shape(2, 16, 2048, 64, DType::bf16)},
                        Case{"odd length, fp16", shape(2, 2, 127, 64, DType::f16)},
                        Case{"head-major, head dim 128", shape(1, 4, 256, 128, DType::bf16, true)}}) {
    SCOPED_TRACE(c.what);
    EXPECT_FALSE(sdpa_cudnn_engines(sdpa_forward_graph(c.s), device).empty()) << describe_sdpa_graph(sdpa_forward_graph(c.s));
    EXPECT_FALSE(sdpa_cudnn_engines(sdpa_backward_graph(c.s), device).empty()) << describe_sdpa_graph(sdpa_backward_graph(c.s));
  }
}

// The check can say no: probabilities handed to the second matmul in fp32 are no pattern of the
// fused engines (they read P in the I/O type).
TEST(CudnnDeviceless, AGraphOutsideTheEnginesPatternsFindsNone) {
  SdpaGraph g = sdpa_forward_graph(shape(2, 16, 2048, 64, DType::bf16));
  for (SdpaTensor& t : g.tensors)
    if (t.name == "P") t.type = SdpaType::f32;
  EXPECT_TRUE(sdpa_cudnn_engines(g, h100()).empty());
}

}  // namespace
}  // namespace moebench
