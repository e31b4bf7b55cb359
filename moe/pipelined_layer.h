// The micro-batch pipelined MoE layer of MPMoE (003 Sec. 3.2-3.3) and the layers it is
// measured against, one class on the expert-parallel dispatcher:
//  - split tokens (MPMoE): the micro-batch's tokens cut on the batch dimension into n parts of
//    possibly unequal size; per part the dispatch all-to-all S (dispatch stream, its own
//    communicator), the experts C (compute stream) and the combine all-to-all R (combine stream,
//    a second communicator), so S of part i+1 and R of part i-1 run while C of part i computes
//    (Fig. 4b); S and R alternate. n = 1 is the FastMoE-style layer (no pipelining).
//  - split worker_groups (FasterMoE style): the ranks form W/g groups of g; at step s a rank
//    sends to group (grp + s) mod (W/g) -- the experts it holds -- and receives from group
//    (grp - s) mod (W/g), one grouped exchange per step; the experts of step s overlap the
//    exchange of step s + 1, the return mirrors it, backward mirrors forward.
// The gate routes the whole micro-batch once (capacity, positions, aux loss are the batch's),
// so every split computes what the plain layer computes; the parts are routing slices.
//
// Memory reuse (Sec. 3.3, Table 2), split tokens only. Without it (PMoE) every part keeps its
// own T_DI (dispatched rows), T_M (expert pre-activation) and T_DO (expert outputs) until
// backward, and its own backward temporaries until the layer's backward ends. With it, parts
// take turns in pooled buffers -- two for T_DI, one for T_M, two for T_DO; a part's buffer is
// given back to the stream-ordered pool when the part two (one for T_M) later needs it -- and
// backward restores T_DI and T_M per part:
//   S1: offload both to pinned host memory on the copy stream, prefetch them back;
//   S2: re-communicate T_DI (redispatch from T_I), offload T_M;
//   S3: offload T_DI, recompute T_M (one GEMM);
//   S4: re-communicate T_DI, recompute T_M.
// The experts keep only T_M (GeLU's input, one [rows, f] tensor as the paper's in-place ReLU)
// in every mode, so the modes differ by the policy alone.
//
// Every op is inside a breakdown range on the stream it runs on (NVTX name = CSV column):
// moe.gating, moe.dispatch / moe.combine (local work), moe.a2a.dispatch (S), moe.expert (C),
// moe.a2a.combine (R), moe.offload (M, forward), and in backward moe.a2a.combine.bwd,
// moe.combine.bwd, moe.restore (M), moe.a2a.redispatch (S2/S4), moe.recompute (S3/S4),
// moe.expert.bwd, moe.dispatch.bwd, moe.a2a.dispatch.bwd, moe.gating.bwd, moe.sync.bwd, moe.gate_sync.bwd. A
// range starts after its op's inputs are ready, so it times the op, not the wait.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "moe/dispatcher.h"
#include "moe/experts.h"
#include "moe/gate.h"
#include "moe/routing_slice.h"
#include "comm/comm.h"
#include "runtime/range.h"

namespace moebench {

enum class PipelineSplit { tokens, worker_groups };
// none: no memory reuse (PMoE; FastMoE- and FasterMoE-style layers); s1..s4: Table 2.
enum class MemoryReuse { none, s1, s2, s3, s4 };
const char* reuse_name(MemoryReuse r);  // "none", "S1", ...
std::optional<MemoryReuse> parse_reuse(const std::string& name);
inline bool offloads_rows(MemoryReuse r) { return r == MemoryReuse::s1 || r == MemoryReuse::s3; }
inline bool offloads_middle(MemoryReuse r) { return r == MemoryReuse::s1 || r == MemoryReuse::s2; }

struct PipelineConfig {
  PipelineSplit split = PipelineSplit::tokens;
  int partitions = 1;  // n (split tokens)
  int group_size = 1;  // g (split worker_groups)
  MemoryReuse reuse = MemoryReuse::none;
  // tokens per rank, world size; names the option at fault (--partitions, --group-size, --strategy).
  std::optional<std::string> validate(int tokens, int world) const;
  // Parts of the split: n, or W / g.
  int parts(int world) const { return split == PipelineSplit::tokens ? partitions : world / group_size; }
  std::string describe() const;  // "MPMoE n=4 S2", "PMoE n=4", "FastMoE-style", "FasterMoE-style g=1"
};

// [first token of part i] for i = 0..n, n parts as even as can be (the first T % n one larger).
std::vector<int> token_split(int tokens, int parts);

struct PipelineStreams {
  Stream compute, dispatch, combine, copy;
};

// One micro-batch in the layer, from forward to backward.
struct PipelinedContext {
  struct Part {
    int t0 = 0, t1 = 0;  // its tokens (split tokens); all tokens for a worker-group step
    Routing routing;
    std::unique_ptr<DispatchState> dispatch;
    ExpertsContext experts;
    Buffer expert_out;               // T_DO
    Buffer host_rows, host_middle;   // T_DI / T_M offloaded (pinned)
    std::unique_ptr<DispatchState> redispatch;  // S2 / S4: T_DI on its way back
    std::shared_ptr<Event> prefetched;          // S1-S3: T_DI / T_M back on the device (copy stream)
    Buffer grad_h, grad_rows;        // backward temporaries a layer without reuse keeps
  };
  const void* x = nullptr;
  int tokens = 0;
  Routing routing;  // the whole micro-batch's
  std::vector<Part> parts;
};

class PipelinedMoELayer {
 public:
  // `dispatch_comm` carries S (and the gate gradient's all-reduce), `combine_comm` R: the same
  // ranks, two communicators so both can be in flight (e.g. world.dup() twice).
  PipelinedMoELayer(const MoEConfig& cfg, const PipelineConfig& pipe, Device& dev, TrackingAllocator& alloc,
                    Communicator& dispatch_comm, Communicator& combine_comm);
  void init(std::uint64_t seed, const Stream& s);

  // x, y: [tokens, h] in cfg.dtype; work starts after what is queued on streams.compute and
  // everything is done when streams.compute reaches its end.
  PipelinedContext forward(const void* x, int tokens, void* y, const PipelineStreams& streams,
                           Breakdown* breakdown = nullptr);
  // dy -> dx; adds this micro-batch's gate, w1 and w2 gradients. `c` is spent.
  void backward(PipelinedContext& c, const void* dy, void* dx, const PipelineStreams& streams,
                Breakdown* breakdown = nullptr);
  void zero_grad(const Stream& s);

  const MoEConfig& config() const { return cfg_; }
  const PipelineConfig& pipeline() const { return pipe_; }
  // Another split or strategy for the next micro-batches, the same weights (a granularity
  // search tries several on one layer). Validated by the caller.
  void set_pipeline(const PipelineConfig& pipe) { pipe_ = pipe; }
  Gate& gate() { return gate_; }
  Experts& experts() { return experts_; }
  TokenDispatcher& dispatcher() { return *dispatcher_; }

 private:
  using Part = PipelinedContext::Part;
  void slice(PipelinedContext& c, const Stream& s);
  const void* rows_in(const Part& p, const void* base) const;  // the part's first token row
  void* rows_in(const Part& p, void* base) const;
  // Copies `src` to new pinned memory on the copy stream once the compute stream gets here.
  void offload(Buffer& src, Buffer& host, const PipelineStreams& st, Breakdown* b);
  // Starts bringing part p's T_DI and T_M back (copies, re-communication), and completes it
  // on the compute stream.
  void restore_begin(const PipelinedContext& c, Part& p, const PipelineStreams& st, Breakdown* b);
  void restore_end(Part& p, const PipelineStreams& st, Breakdown* b);

  MoEConfig cfg_;
  PipelineConfig pipe_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Communicator& comm_;
  std::unique_ptr<TokenDispatcher> dispatcher_;
  Gate gate_;
  Experts experts_;
  HostStaging upload_;
};

}  // namespace moebench
