// One MoE model (an MoE layer in every other block, 4 experts, top-1, dropless) in PPMoE Table
// 2's layouts over every rank mpirun gives (CTest: 1, 2 and 4), against the same model whole on
// one rank: DPMoE (DP = EP: each rank its own sequences, the experts spread over the ranks,
// tokens exchanged by all-to-all, dense gradients all-reduced) and PPMoE (the ranks a TP group:
// the same sequences, attention and MLP split Megatron's way, each rank index-selecting its
// experts' tokens and all-reducing). Loss, replicated gradients and each rank's expert
// gradients equal the one-rank model's. On MOEBENCH_TEST_BACKEND's backend (on cuda over NCCL).
#include <gtest/gtest.h>
#include <mpi.h>
#include "moe_test_util.h"
#include "gpt/gpt_model.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

constexpr int kLayoutSequences = 4;

GptConfig moe_model() {
  // Top-1, dropless, as PPMoE.
  GptConfig c = gpt_config({.layers = 2, .hidden = 8, .ffn = 16, .heads = 4, .seq = 6, .vocab = 13, .experts = 4, .moe_every = 2});
  c.moe.aux_coef = 0.01f;
  return c;
}

struct Trained {
  double loss = 0;
  long long expert_rows = 0;  // this rank's experts' rows in the forward
  std::vector<std::vector<float>> grads;  // per parameter tensor
};

Trained train(Device& dev, const GptConfig& cfg, Communicator* tp, const DispatcherFactory& dispatcher, int first_sequence,
        int sequences) {
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Stream& s = dev.default_stream();
  GptModel model(cfg, dev, alloc, tp, dispatcher);
  model.init(31, s);
  const int T = kLayoutSequences * cfg.seq, off = first_sequence * cfg.seq;
  auto tokens = token_ids(T, cfg.vocab, 1), targets = token_ids(T, cfg.vocab, 2);
  test_backend::DeviceMirror d(dev, s);
  Trained r;
  r.loss = model.forward_backward(d(tokens) + off, d(targets) + off, sequences, 1.f / T, s);
  r.expert_rows = model.expert_rows();
  for (auto& [w, g] : model.parameters()) r.grads.push_back(test_backend::host_floats(dev, *g));
  return r;
}

// Parameter tensors of the model (GptModel::parameters()): 0-1 embeddings; block 0 (dense)
// 2-9: LN1 gamma, beta, Wqkv, Wo, LN2 gamma, beta, W1, W2; block 1 (MoE) 10-18: LN1 gamma, beta,
// Wqkv, Wo, LN2 gamma, beta, gate, experts' W1, W2; 19-20 the final LayerNorm.
constexpr int kGate = 16, kExpertW1 = 17, kExpertW2 = 18;
bool expert_tensor(int i) { return i == kExpertW1 || i == kExpertW2; }
// What data parallelism must not sum again: the experts (each rank its own) and the gate (the
// expert-parallel layer sums its gradient over the all-to-all's ranks itself).
bool summed_by_the_layer(int i) { return expert_tensor(i) || i == kGate; }

TEST(MoELayouts, DPMoEEqualsOneRank) {
  auto world = test_backend::world();
  const int D = world->size(), r = world->rank();
  ASSERT_EQ(kLayoutSequences % D, 0) << "run at 1, 2 or 4 ranks";
  Device dev = test_backend::open_device();
  const GptConfig cfg = moe_model();
  // The reference routes in D capacity groups, as the D ranks do.
  const Trained want = train(dev, cfg, nullptr, [&](const DispatcherEnv& env) { return make_local_dispatcher(env, D); }, 0, kLayoutSequences);
  Trained got = train(dev, cfg, nullptr, [&](const DispatcherEnv& env) { return make_expert_parallel_dispatcher(env, *world); },
                r * kLayoutSequences / D, kLayoutSequences / D);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  // The host copies summed over MPI, whatever the backend's communicator.
  for (std::size_t i = 0; i < got.grads.size(); ++i)  // data parallelism: the dense gradients summed
    if (!summed_by_the_layer(int(i)))
      MPI_Allreduce(MPI_IN_PLACE, got.grads[i].data(), int(got.grads[i].size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double loss = got.loss;
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_NEAR(loss, want.loss, 1e-4 * want.loss);
  // Dropless top-1, one MoE block: the ranks' experts compute every token once between them.
  long long rows = got.expert_rows;
  MPI_Allreduce(MPI_IN_PLACE, &rows, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(want.expert_rows, kLayoutSequences * cfg.seq);
  EXPECT_EQ(rows, kLayoutSequences * cfg.seq);
  const double tol = test_backend::f32_tolerance(1e-5);
  for (std::size_t i = 0; i < want.grads.size(); ++i) {
    const std::size_t n = got.grads[i].size(), first = expert_tensor(int(i)) ? std::size_t(r) * n : 0;
    ASSERT_LE(first + n, want.grads[i].size());
    EXPECT_LT(rel_diff(got.grads[i].data(), want.grads[i].data() + first, n), tol) << "gradient of parameter " << i;
  }
}

// Its experts by the grouped route, and by the padded one, whose rows the PPMoE dispatcher writes
// straight into the blocks (and the overflow) of its own experts (the pool poisoned in CTest:
// padding left unzeroed would show as NaN).
TEST(MoELayouts, PPMoEInsideTheTensorParallelGroupEqualsOneRank) {
  auto world = test_backend::world();
  const int t = world->size(), r = world->rank();
  Device dev = test_backend::open_device();
  const double tol = test_backend::f32_tolerance(1e-5);
  const GptConfig cfg = moe_model();
  const Trained want = train(dev, cfg, nullptr, [&](const DispatcherEnv& env) { return make_local_dispatcher(env, 1); }, 0, kLayoutSequences);
  // The padded route twice: as it picks its blocks, and with the busier experts in the overflow
  // (its costs taken away: the blocks come lower than the busiest expert's rows).
  for (auto [route, overflow] : {std::pair{ExpertGemm::grouped, false}, std::pair{ExpertGemm::padded, false},
                                 std::pair{ExpertGemm::padded, true}}) {
    SCOPED_TRACE(std::string(expert_gemm_name(route)) + (overflow ? ", experts in the overflow" : ""));
    GptConfig routed = cfg;
    routed.moe.expert_gemm = route;
    if (overflow) routed.moe.padded_cost = {0, 1};
    const Trained got = train(dev, routed, world.get(), [&](const DispatcherEnv& env) { return make_ppmoe_dispatcher(env, *world); },
                              0, kLayoutSequences);
    EXPECT_NEAR(got.loss, want.loss, 1e-4 * want.loss);
    ASSERT_EQ(got.grads.size(), want.grads.size());
    // Replicated on every rank: embeddings, LayerNorms, the gate; the experts: this rank's E / t.
    for (int i : {0, 1, 2, 3, 6, 7, 10, 11, 14, 15, kGate, 19, 20}) {
      ASSERT_EQ(got.grads[i].size(), want.grads[i].size()) << "parameter " << i;
      EXPECT_LT(rel_diff(got.grads[i].data(), want.grads[i].data(), want.grads[i].size()), tol) << "gradient of parameter " << i;
    }
    for (int i : {kExpertW1, kExpertW2}) {
      const std::size_t n = got.grads[i].size();
      ASSERT_EQ(n * t, want.grads[i].size());
      EXPECT_LT(rel_diff(got.grads[i].data(), want.grads[i].data() + std::size_t(r) * n, n), tol)
          << "gradient of parameter " << i;
    }
  }
}

}  // namespace
}  // namespace moebench
