// Runs a schedule table (models/pipeline_schedule.h) on the ranks of a pipeline communicator,
// rank s being stage s: each stage takes its ops in the table's order on its compute stream --
// a forward receives its input from stage s - 1, a backward its output gradient from stage
// s + 1 -- and sends what it produced on a stream of its own, so a send waiting for its
// receiver never holds up the stage's compute. Every op is timed by events on the compute
// stream: a stage's busy time, and the bubble as the rest of the step, come from its own events.
// Each op is also a range on the compute stream (NVTX and the timeline): pipe.fwd, pipe.bwd
// (the whole backward, or B where the schedule splits it) and pipe.wgrad (W).
//
// Each direction has a communicator of its own: activations go forward over `comm`, gradients
// back over a duplicate of it. NCCL runs one communicator's operations in the order the host
// issued them, whatever their streams; over one communicator 1F1B's steady state deadlocks
// once a message exceeds NCCL's buffer (stage s issues "send F(j+1)" before "recv B(j)", stage
// s + 1 "send B(j)" before "recv F(j+1)"). Along one direction, every rank issues its receive
// of a micro-batch before its send of it, so the sends' waits form a chain that ends at the
// last stage (forward) or the first (backward), and never a cycle.
#pragma once
#include <memory>
#include <vector>
#include "models/pipeline_schedule.h"
#include "models/pipeline_simulator.h"
#include "pipeline/pipeline_stage.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "comm/comm.h"

namespace moebench {

struct PipelineStepRecord {
  std::vector<SimulatedOp> ops;  // this stage's ops as run: ms from the step's start
  double busy_ms = 0;            // their sum
  double makespan_ms = 0;        // the step's end on the slowest stage (the same on every rank)
  double bubble_fraction() const { return makespan_ms > 0 ? 1 - busy_ms / makespan_ms : 0; }
  // Mean op times per kind on this stage (the simulator's input).
  StageOpTimes mean_op_ms() const;
};

class PipelineEngine {
 public:
  // `comm`: the pipeline's ranks, stage = rank. `compute` and `send`: two streams of `dev`.
  // Collective over `comm` (it duplicates it for the gradients).
  PipelineEngine(PipelineStage& stage, Communicator& comm, Device& dev, TrackingAllocator& alloc, Stream compute, Stream send);

  // One step's forwards and backwards over the table's micro-batches of `rows` rows each.
  // Stage 0 reads inputs[j]; the last stage writes outputs[j] and takes output_grads[j] as
  // dL/dy (device pointers, [rows, width]). Either list may be empty: the stage then gets null
  // (a first stage that reads its own tokens, a last stage that starts from its own loss). Gradients accumulate in the stage's weights'
  // gradients. Collective over `comm`. The record (each op's times and the step's makespan over
  // the stages, which start it together at a barrier) waits for the step on the host;
  // enqueue_step() leaves it and the barrier out and returns once the step is enqueued, the
  // compute stream ordered after this stage's last send: it may be captured into a graph
  // (runtime/stream_graph.h), the send stream joining the capture through its events.
  PipelineStepRecord run(const PipelineSchedule& schedule, int rows, const std::vector<const void*>& inputs,
                         const std::vector<void*>& outputs, const std::vector<const void*>& output_grads);
  void enqueue_step(const PipelineSchedule& schedule, int rows);

 private:
  PipelineStepRecord run(const PipelineSchedule& schedule, int rows, const std::vector<const void*>& inputs,
                         const std::vector<void*>& outputs, const std::vector<const void*>& output_grads, bool record);
  PipelineStage& stage_;
  Communicator& comm_;                      // activations, forward; the step's barrier and makespan
  std::unique_ptr<Communicator> backward_;  // gradients, backward
  Device& dev_;
  TrackingAllocator& alloc_;
  Stream compute_, send_;
};

}  // namespace moebench
