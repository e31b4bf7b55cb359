// A token dispatcher moves routed tokens to the experts that compute them and the results
// back (the Megatron router / dispatcher / experts split). Each direction is three phases, as
// Megatron's dispatch_preprocess / token_dispatch / dispatch_postprocess seam:
//   prepare  -- local work only (permutations, counts) on a compute stream,
//   exchange -- communication only, on a given (communication) stream,
//   finish   -- local work only, on a compute stream,
// so a layer can interleave micro-batches: prepare(1) and exchange(1) on the comm stream while
// the experts compute micro-batch 0. The phases of one micro-batch share a DispatchState that
// also orders them: each phase records where it ended and the next waits for it, whatever
// streams they run on. Directions, in order:
//   forward:  dispatch -> (experts) -> combine
//   backward: combine_backward -> (experts) -> dispatch_backward -> (gate) -> sync_input_gradient,
//             sync_gate_gradient
// A new strategy is a new dispatcher; the gate and the experts stay as they are. A dispatcher
// keeps no micro-batch: any number of states may be alive at once.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "moe/config.h"
#include "moe/gate.h"
#include "runtime/allocator.h"
#include "comm/comm.h"
#include "runtime/device.h"

namespace moebench {

// One micro-batch in a dispatcher, from dispatch to the end of backward.
struct DispatchState {
  explicit DispatchState(Backend b) : ready(b) {}
  virtual ~DispatchState() = default;
  Event ready;                        // where the last phase ended
  std::optional<Stream> last;         // the stream it ran on
  // dispatch: the local experts' rows, expert-major [R, h], and how many per local expert
  Buffer rows;
  std::vector<int> rows_per_expert;
  // ... or, where the dispatcher writes them straight into --expert-gemm padded's blocks, `rows`
  // is [local experts, padded, h]: expert l's rows first in block l, its padding rows zero. The
  // expert outputs and their gradient (d_expert_out) keep that layout.
  int padded = 0;
  // ... or, where the counts stay on the device (--expert-gemm segmented), each local expert's
  // first row and the end ([local experts + 1], on the device), `rows` holding row_bound rows.
  Buffer expert_offset;
  std::size_t row_bound = 0;
  // combine_backward: the gradient of the local experts' outputs [R, h]
  Buffer d_expert_out;

  // A phase starts on `s`: after the previous phase, wherever it ran.
  void begin(const Stream& s) {
    if (!last || (last->handle == s.handle && last->queue == s.queue)) return;  // same stream: in order already
    ready.make_wait(s);
  }
  // A phase ends on `s`.
  void end(const Stream& s) {
    ready.record(s);
    last = s;
  }
};

class TokenDispatcher {
 public:
  virtual ~TokenDispatcher() = default;
  virtual std::string name() const = 0;
  virtual int first_local_expert() const = 0;
  virtual int local_experts() const = 0;
  // Token groups with their own expert capacity (GShard groups).
  virtual int capacity_groups(int tokens) const = 0;
  // Share of the aux-loss gradient this rank adds (ranks holding the same tokens split it).
  virtual float aux_grad_scale() const = 0;
  // Whether dispatch reads the gate's counts on the host (to size buffers and exchanges). When it
  // does not, the gate copies none and nothing in the layer's step waits for the device.
  virtual bool reads_host_counts() const { return true; }

  // dispatch: x [T, h] -> state.rows [R, h] expert-major for the local experts.
  virtual std::unique_ptr<DispatchState> dispatch_prepare(const Routing& r, const void* x, const Stream& s) = 0;
  virtual void dispatch_exchange(DispatchState& st, const Stream& comm) = 0;
  virtual void dispatch_finish(DispatchState& st, const Stream& s) = 0;
  // combine: expert outputs [R, h] -> y [T, h], weighted by the gate.
  virtual void combine_prepare(DispatchState& st, const Routing& r, const Buffer& expert_out, void* y,
                               const Stream& s) = 0;
  virtual void combine_exchange(DispatchState& st, const Stream& comm) = 0;
  virtual void combine_finish(DispatchState& st, const Stream& s) = 0;
  // combine backward: dy [T, h] -> state.d_expert_out [R, h] and the combine-weight gradient dweight [T, S].
  virtual void combine_backward_prepare(DispatchState& st, const Routing& r, const void* dy, float* dweight,
                                        const Stream& s) = 0;
  virtual void combine_backward_exchange(DispatchState& st, const Stream& comm) = 0;
  virtual void combine_backward_finish(DispatchState& st, const Stream& s) = 0;
  // dispatch backward: d_rows [R, h] -> dx [T, h] (overwritten).
  virtual void dispatch_backward_prepare(DispatchState& st, const Routing& r, const Buffer& d_rows, void* dx,
                                         const Stream& s) = 0;
  virtual void dispatch_backward_exchange(DispatchState& st, const Stream& comm) = 0;
  virtual void dispatch_backward_finish(DispatchState& st, const Stream& s) = 0;
  // Dispatch the micro-batch of `st` once more from x (MPMoE S2 / S4 restore the dispatched rows
  // a memory-sharing layer dropped): the same routing, maps and counts -- no counts exchange --
  // into a new state whose `rows` equal st.rows as dispatch left them. The new state's phases
  // order among themselves only; `st` must outlive it and not have run dispatch_backward_prepare.
  virtual std::unique_ptr<DispatchState> redispatch_prepare(const DispatchState& st, const void* x,
                                                            const Stream& s) = 0;
  virtual void redispatch_exchange(DispatchState& re, const Stream& comm) = 0;
  virtual void redispatch_finish(DispatchState& re, const Stream& s) = 0;
  // After the gate's backward, on `s`: the input gradient summed over the ranks that hold the
  // same tokens (PPMoE's TP group; nothing where each rank has its own) ...
  virtual void sync_input_gradient(void* dx, std::size_t count, const Stream& s) = 0;
  // ... and this micro-batch's gate-weight gradient over the ranks the gate is replicated on
  // (000 Sec. 3.3.4: h x E a step, against the data's b s h).
  virtual void sync_gate_gradient(float* gate_grad, std::size_t count, const Stream& s) = 0;

  // Each direction's three phases on one stream.
  std::unique_ptr<DispatchState> dispatch(const Routing& r, const void* x, const Stream& s);
  void combine(DispatchState& st, const Routing& r, const Buffer& expert_out, void* y, const Stream& s);
  void combine_backward(DispatchState& st, const Routing& r, const void* dy, float* dweight, const Stream& s);
  void dispatch_backward(DispatchState& st, const Routing& r, const Buffer& d_rows, void* dx, const Stream& s);
  std::unique_ptr<DispatchState> redispatch(const DispatchState& st, const void* x, const Stream& s);
};

class Breakdown;

// The end of every MoE layer's backward, once the dispatch backward has written dx: the gate's
// backward (range moe.gating.bwd) adds its input gradient into dx, then the dispatcher sums the
// input gradient over ranks (moe.sync.bwd) and the gate-weight gradient (moe.gate_sync.bwd,
// timed apart: 000 Sec. 3.3.4 calls it negligible), which goes into gate.grad().
void finish_layer_backward(Gate& gate, TokenDispatcher& dispatcher, const Routing& r, const void* x,
                           const float* dweight, void* dx, Device& dev, TrackingAllocator& alloc, const Stream& s,
                           Breakdown* breakdown);

// Which experts a rank holds and how the dispatchers are made.
struct DispatcherEnv {
  MoEConfig cfg;  // a copy: dispatchers outlive the caller's config
  Device& dev;
  TrackingAllocator& alloc;
};

// All experts on this rank; `groups` capacity groups (the reference for expert parallelism
// over `groups` ranks uses the same groups).
std::unique_ptr<TokenDispatcher> make_local_dispatcher(const DispatcherEnv& env, int groups = 1);
// DPMoE / FastMoE style: E / D experts per rank of `comm`, tokens exchanged with all-to-all-v.
// `combine_comm` (the same ranks, e.g. comm.dup()) carries the combine direction -- combine and
// its backward -- so that a pipelined layer has a dispatch of one micro-batch and a combine of
// another in flight at once (MPMoE's S and R); by default `comm` carries both. The only
// dispatcher that takes expert slices of a routing (Routing::expert_slice).
std::unique_ptr<TokenDispatcher> make_expert_parallel_dispatcher(const DispatcherEnv& env, Communicator& comm,
                                                                 Communicator* combine_comm = nullptr);
// PPMoE (000 Algorithm 1): ranks of `comm` (a tensor-parallel group) hold the same tokens,
// each computes its E / TP experts by index selection, outputs are all-reduced.
std::unique_ptr<TokenDispatcher> make_ppmoe_dispatcher(const DispatcherEnv& env, Communicator& comm);

}  // namespace moebench
