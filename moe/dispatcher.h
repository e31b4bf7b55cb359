// A token dispatcher moves routed tokens to the experts that compute them and the results
// back (the Megatron router / dispatcher / experts split). The layer calls, in order:
//   forward:  dispatch -> (experts) -> combine
//   backward: combine_backward -> (experts) -> dispatch_backward -> (gate) -> sync_gradients
// A new strategy is a new dispatcher; the gate and the experts stay as they are.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/comm.h"
#include "runtime/device.h"
#include "moe/config.h"
#include "moe/gate.h"

namespace moebench {

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

  // x [T, h] -> rows [R, h] expert-major for the local experts; rows_per_expert[local e].
  virtual void dispatch(const Routing& r, const void* x, Buffer& rows, std::vector<int>& rows_per_expert) = 0;
  // expert outputs [R, h] -> y [T, h], weighted by the gate.
  virtual void combine(const Routing& r, const Buffer& expert_out, void* y) = 0;
  // dy [T, h] -> d_expert_out [R, h] and the combine-weight gradient dweight [T, S].
  virtual void combine_backward(const Routing& r, const void* dy, const Buffer& expert_out, Buffer& d_expert_out,
                                float* dweight) = 0;
  // d_rows [R, h] -> dx [T, h] (overwritten).
  virtual void dispatch_backward(const Routing& r, const Buffer& d_rows, void* dx) = 0;
  // After the gate's backward: whatever must be summed over ranks (input and gate gradients).
  virtual void sync_gradients(void* dx, std::size_t dx_count, float* gate_grad, std::size_t gate_count) = 0;
};

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
std::unique_ptr<TokenDispatcher> make_expert_parallel_dispatcher(const DispatcherEnv& env, Communicator& comm);
// PPMoE (000 Algorithm 1): ranks of `comm` (a tensor-parallel group) hold the same tokens,
// each computes its E / TP experts by index selection, outputs are all-reduced.
std::unique_ptr<TokenDispatcher> make_ppmoe_dispatcher(const DispatcherEnv& env, Communicator& comm);

}  // namespace moebench
