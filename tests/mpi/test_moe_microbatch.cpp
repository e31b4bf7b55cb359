// Several micro-batches in flight, for every dispatcher, at whatever world size mpirun gives
// (CTest: 1, 2 and 4 ranks): 2, 4 and 8 contexts alive at once with backwards in any order give
// each micro-batch the outputs and input gradients it gets alone, and weight gradients that sum
// the micro-batches'; and the phased dispatchers driven by hand -- micro-batches interleaved,
// exchanges on a communication stream, local work on a compute stream -- equal the plain layer.
#include <gtest/gtest.h>
#include <algorithm>
#include <cstring>
#include <mpi.h>
#include <numeric>
#include <random>
#include "kernels/axpy.h"
#include "moe_test_util.h"
#include "comm/comm.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

struct Grads {
  std::vector<float> gate, w1, w2;
};

class MicroBatches : public test_backend::WorldTest<test_backend::WorldOf::mpi> {
 protected:

  // A fresh layer of dispatcher `which` with the same weights on every layout.
  std::unique_ptr<MoELayer> make_layer(const std::string& which) {
    DispatcherEnv env{cfg, dev, alloc};
    auto d = which == "local" ? make_local_dispatcher(env)
             : which == "expert_parallel" ? make_expert_parallel_dispatcher(env, *world)
                                          : make_ppmoe_dispatcher(env, *world);
    auto layer = std::make_unique<MoELayer>(cfg, dev, alloc, std::move(d));
    layer->init(7, dev.default_stream());
    return layer;
  }

  // Micro-batch i's tokens on this rank (PPMoE ranks share theirs).
  std::vector<float> tokens_of(const std::string& which, int i) const {
    return tokens(T, cfg.hidden, 100 + i, which == "ppmoe" ? 0 : r * T);
  }
  std::vector<float> dy_of(const std::string& which, int i) const {
    return tokens(T, cfg.hidden, 200 + i, which == "ppmoe" ? 0 : r * T);
  }

  Grads grads(MoELayer& layer) {
    const std::size_t g = std::size_t(cfg.hidden) * cfg.experts;
    const std::size_t w = std::size_t(layer.experts().count()) * cfg.hidden * cfg.ffn;
    const float* gp = layer.gate().grad().as<float>();
    const float* w1 = layer.experts().w1_grad().as<float>();
    const float* w2 = layer.experts().w2_grad().as<float>();
    return Grads{{gp, gp + g}, {w1, w1 + w}, {w2, w2 + w}};
  }

  // Each micro-batch alone, one after another: outputs, input gradients, and the weight
  // gradients summed over the micro-batches (in double).
  void reference(const std::string& which, int m, std::vector<std::vector<float>>& y, std::vector<std::vector<float>>& dx,
                 Grads& sum) {
    auto layer = make_layer(which);
    const Stream& s = dev.default_stream();
    std::vector<double> g, w1, w2;
    for (int i = 0; i < m; ++i) {
      const auto x = tokens_of(which, i), dy = dy_of(which, i);
      y.emplace_back(x.size());
      dx.emplace_back(x.size());
      layer->zero_grad(s);
      MoEContext c = layer->forward(x.data(), T, y.back().data(), s);
      layer->backward(c, dy.data(), dx.back().data(), s);
      const Grads one = grads(*layer);
      auto add = [](std::vector<double>& acc, const std::vector<float>& v) {
        acc.resize(v.size(), 0.0);
        for (std::size_t k = 0; k < v.size(); ++k) acc[k] += v[k];
      };
      add(g, one.gate);
      add(w1, one.w1);
      add(w2, one.w2);
    }
    sum = Grads{{g.begin(), g.end()}, {w1.begin(), w1.end()}, {w2.begin(), w2.end()}};
  }

  void expect_grads(const Grads& got, const Grads& want, const std::string& what) {
    EXPECT_LT(rel_diff(got.gate.data(), want.gate.data(), want.gate.size()), 1e-5) << what << " gate";
    EXPECT_LT(rel_diff(got.w1.data(), want.w1.data(), want.w1.size()), 1e-5) << what << " w1";
    EXPECT_LT(rel_diff(got.w2.data(), want.w2.data(), want.w2.size()), 1e-5) << what << " w2";
  }

  MoEConfig cfg = multi_rank_test_config();
  const int T = 12;
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
};

const char* const kDispatchers[] = {"local", "expert_parallel", "ppmoe"};

}  // namespace

TEST_F(MicroBatches, ContextsAliveAtOnceWithBackwardsInAnyOrderEqualEachMicroBatchAlone) {
  for (const std::string which : kDispatchers)
    for (int m : {2, 4, 8}) {
      SCOPED_TRACE(which + ", " + std::to_string(m) + " micro-batches");
      std::vector<std::vector<float>> y_ref, dx_ref;
      Grads g_ref;
      reference(which, m, y_ref, dx_ref, g_ref);
      // Backward orders: reversed, and a shuffle the same on every rank (their collectives must match).
      std::vector<int> reversed(m), shuffled(m);
      std::iota(reversed.rbegin(), reversed.rend(), 0);
      std::iota(shuffled.begin(), shuffled.end(), 0);
      std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(m));
      for (const auto& order : {reversed, shuffled}) {
        auto layer = make_layer(which);
        const Stream& s = dev.default_stream();
        std::vector<std::vector<float>> xs, ys, dxs(m);
        std::vector<MoEContext> live;
        for (int i = 0; i < m; ++i) {
          xs.push_back(tokens_of(which, i));
          ys.emplace_back(xs.back().size());
          live.push_back(layer->forward(xs.back().data(), T, ys.back().data(), s));
        }
        for (int i : order) {
          const auto dy = dy_of(which, i);
          dxs[i].resize(dy.size());
          layer->backward(live[i], dy.data(), dxs[i].data(), s);
        }
        for (int i = 0; i < m; ++i) {
          EXPECT_EQ(0, std::memcmp(ys[i].data(), y_ref[i].data(), ys[i].size() * 4)) << "y of micro-batch " << i;
          EXPECT_EQ(0, std::memcmp(dxs[i].data(), dx_ref[i].data(), dxs[i].size() * 4)) << "dx of micro-batch " << i;
        }
        expect_grads(grads(*layer), g_ref, "accumulated");
      }
    }
}

// The local layer's micro-batches on two worker streams at once (no communication to order).
TEST_F(MicroBatches, LocalMicroBatchesOnTwoStreamsAtOnce) {
  const int m = 4;
  std::vector<std::vector<float>> y_ref, dx_ref;
  Grads g_ref;
  reference("local", m, y_ref, dx_ref, g_ref);
  Stream streams[2] = {dev.create_stream("mb even"), dev.create_stream("mb odd")};
  auto layer = make_layer("local");
  // Two layers' worth of weight gradients would race on one stream each: accumulate per stream.
  std::vector<std::vector<float>> xs, ys, dys, dxs;
  std::vector<MoEContext> live;
  for (int i = 0; i < m; ++i) {
    xs.push_back(tokens_of("local", i));
    dys.push_back(dy_of("local", i));
    ys.emplace_back(xs.back().size());
    dxs.emplace_back(xs.back().size());
  }
  for (int i = 0; i < m; ++i) live.push_back(layer->forward(xs[i].data(), T, ys[i].data(), streams[i % 2]));
  // Backwards touch the shared gradients: order them, even stream first, by an event.
  for (int i = m - 1; i >= 0; --i) {
    const Stream& s = streams[i % 2];
    const Stream& other = streams[1 - i % 2];
    Event before(Backend::cpu);
    before.record(other);
    before.make_wait(s);
    layer->backward(live[i], dys[i].data(), dxs[i].data(), s);
  }
  dev.synchronize();
  for (int i = 0; i < m; ++i) {
    EXPECT_EQ(0, std::memcmp(ys[i].data(), y_ref[i].data(), ys[i].size() * 4)) << i;
    EXPECT_EQ(0, std::memcmp(dxs[i].data(), dx_ref[i].data(), dxs[i].size() * 4)) << i;
  }
  expect_grads(grads(*layer), g_ref, "two streams");
}

// Two micro-batches driven phase by phase and interleaved as a pipelined layer would: local
// work on a compute stream, every exchange on a communication stream.
TEST_F(MicroBatches, PhasedDispatchersDrivenByHandEqualThePlainLayer) {
  const int m = 2;
  Stream compute = dev.create_stream("compute"), comms = dev.create_stream("comm");
  for (const std::string which : kDispatchers) {
    SCOPED_TRACE(which);
    std::vector<std::vector<float>> y_ref, dx_ref;
    Grads g_ref;
    reference(which, m, y_ref, dx_ref, g_ref);
    auto layer = make_layer(which);
    TokenDispatcher& d = layer->dispatcher();
    Experts& experts = layer->experts();
    std::vector<std::vector<float>> xs, ys, dys, dxs;
    for (int i = 0; i < m; ++i) {
      xs.push_back(tokens_of(which, i));
      dys.push_back(dy_of(which, i));
      ys.emplace_back(xs.back().size());
      dxs.emplace_back(xs.back().size());
    }
    std::vector<Routing> routing;
    std::vector<std::unique_ptr<DispatchState>> st;
    std::vector<ExpertsContext> ec(m);
    std::vector<Buffer> out(m), dweight(m), d_rows(m), gate_grad(m);
    for (int i = 0; i < m; ++i) routing.push_back(layer->gate().forward(xs[i].data(), T, d.capacity_groups(T), compute));
    // forward: prepare(0) prepare(1) exchange(0) exchange(1) | finish(0) experts(0) | finish(1) ...
    for (int i = 0; i < m; ++i) st.push_back(d.dispatch_prepare(routing[i], xs[i].data(), compute));
    for (int i = 0; i < m; ++i) d.dispatch_exchange(*st[i], comms);
    for (int i = 0; i < m; ++i) {
      d.dispatch_finish(*st[i], compute);
      out[i] = alloc.allocate(st[i]->rows.bytes(), MemTag::activations, compute);
      ec[i] = experts.forward(st[i]->rows.data(), st[i]->rows_per_expert, out[i].data(), compute);
      d.combine_prepare(*st[i], routing[i], out[i], ys[i].data(), compute);
    }
    for (int i = 0; i < m; ++i) d.combine_exchange(*st[i], comms);
    for (int i = 0; i < m; ++i) d.combine_finish(*st[i], compute);
    // backward, in reverse, the same interleaving
    layer->zero_grad(compute);
    for (int i = m - 1; i >= 0; --i) {
      dweight[i] = alloc.allocate(std::size_t(T) * routing[i].slots() * 4, MemTag::temporary, compute);
      d.combine_backward_prepare(*st[i], routing[i], dys[i].data(), dweight[i].as<float>(), compute);
    }
    for (int i = m - 1; i >= 0; --i) d.combine_backward_exchange(*st[i], comms);
    for (int i = m - 1; i >= 0; --i) {
      d.combine_backward_finish(*st[i], compute);
      d_rows[i] = alloc.allocate(st[i]->d_expert_out.bytes(), MemTag::temporary, compute);
      experts.backward(ec[i], st[i]->d_expert_out.data(), d_rows[i].data(), compute);
      d.dispatch_backward_prepare(*st[i], routing[i], d_rows[i], dxs[i].data(), compute);
    }
    for (int i = m - 1; i >= 0; --i) d.dispatch_backward_exchange(*st[i], comms);
    const std::size_t gate_count = std::size_t(cfg.hidden) * cfg.experts;
    for (int i = m - 1; i >= 0; --i) {
      d.dispatch_backward_finish(*st[i], compute);
      gate_grad[i] = alloc.allocate(gate_count * 4, MemTag::temporary, compute);
      layer->gate().backward(routing[i], xs[i].data(), dweight[i].as<float>(), dxs[i].data(), d.aux_grad_scale(),
                             gate_grad[i].as<float>(), compute);
      d.sync_input_gradient(dxs[i].data(), dxs[i].size(), compute);
      d.sync_gate_gradient(gate_grad[i].as<float>(), gate_count, compute);
      axpy(dev.exec(compute), gate_count, 1.f, gate_grad[i].data(), layer->gate().grad().data(), DType::f32);
    }
    dev.synchronize();
    for (int i = 0; i < m; ++i) {
      EXPECT_EQ(0, std::memcmp(ys[i].data(), y_ref[i].data(), ys[i].size() * 4)) << "y " << i;
      EXPECT_EQ(0, std::memcmp(dxs[i].data(), dx_ref[i].data(), dxs[i].size() * 4)) << "dx " << i;
    }
    expect_grads(grads(*layer), g_ref, "phased");
  }
}

}  // namespace moebench
