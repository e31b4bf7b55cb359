#include "pipeline/pipeline_engine.h"
#include <memory>
#include <string>
#include "runtime/range.h"
#include "runtime/stream.h"

namespace moebench {

StageOpTimes PipelineStepRecord::mean_op_ms() const {
  double sum[3] = {0, 0, 0};
  int n[3] = {0, 0, 0};
  for (const SimulatedOp& o : ops) {
    const int k = o.step.op == PipeOp::F ? 0 : o.step.op == PipeOp::B ? 1 : 2;
    sum[k] += o.end - o.start;
    ++n[k];
  }
  return StageOpTimes{n[0] ? sum[0] / n[0] : 0, n[1] ? sum[1] / n[1] : 0, n[2] ? sum[2] / n[2] : 0};
}

PipelineEngine::PipelineEngine(PipelineStage& stage, Communicator& comm, Device& dev, TrackingAllocator& alloc, Stream compute,
                               Stream send)
    : stage_(stage),
      comm_(comm),
      backward_(comm.dup()),
      dev_(dev),
      alloc_(alloc),
      compute_(std::move(compute)),
      send_(std::move(send)) {}

PipelineStepRecord PipelineEngine::run(const PipelineSchedule& schedule, int rows, const std::vector<const void*>& inputs,
                                       const std::vector<void*>& outputs, const std::vector<const void*>& output_grads) {
  return run(schedule, rows, inputs, outputs, output_grads, /*record=*/true);
}

void PipelineEngine::enqueue_step(const PipelineSchedule& schedule, int rows) {
  run(schedule, rows, {}, {}, {}, /*record=*/false);
}

PipelineStepRecord PipelineEngine::run(const PipelineSchedule& schedule, int rows, const std::vector<const void*>& inputs,
                                       const std::vector<void*>& outputs, const std::vector<const void*>& output_grads,
                                       bool record) {
  const int s = comm_.rank(), P = comm_.size(), M = schedule.micro_batches;
  if (schedule.stages != P)
    throw Error("PipelineEngine: a table of " + std::to_string(schedule.stages) + " stages on " + std::to_string(P) + " ranks");
  auto given = [M](std::size_t n) { return n == 0 || int(n) == M; };
  if ((s == 0 && !given(inputs.size())) || (s == P - 1 && (!given(outputs.size()) || !given(output_grads.size()))))
    throw Error("PipelineEngine: one input (first stage) and one output and output gradient (last stage) per micro-batch, or none");
  const int H = stage_.width();
  const DType act = stage_.activation_dtype();
  const std::size_t count = std::size_t(rows) * H, bytes = count * dtype_size(act);
  const bool split = schedule.splits_backward();

  struct Timed {
    PipeStep step;
    std::unique_ptr<Event> begin, end;
  };
  std::vector<Timed> timed;
  auto mark = [&] {
    auto e = std::make_unique<Event>(dev_.backend(), EventUse::timing);
    e->record(compute_);
    return e;
  };
  // What this stage sent stays here until its send has finished: released earlier (stream-
  // ordered, record_stream) a buffer would make the compute stream wait for the send in the
  // pool's poison mode, and a send waits for its receiver: two stages would wait on each other.
  struct Sent {
    Buffer buffer;
    std::unique_ptr<Event> done;
  };
  std::vector<Sent> in_flight;
  // A step captured into a graph cannot ask whether a send has finished: its buffers stay to the end.
  const bool captured = compute_.capturing();
  bool sent_any = false;
  auto send_after = [&](Buffer& b, const Event& produced, int peer) {
    sent_any = true;
    produced.make_wait(send_);
    (peer > s ? comm_ : *backward_).send(b.data(), count, act, peer, send_);
    auto done = std::make_unique<Event>(dev_.backend());
    done->record(send_);
    in_flight.push_back({std::move(b), std::move(done)});
    for (std::size_t i = 0; !captured && i < in_flight.size();)  // the ones already sent go back to the pool
      if (in_flight[i].done->query()) {
        in_flight[i] = std::move(in_flight.back());
        in_flight.pop_back();
      } else {
        ++i;
      }
  };

  // The stages start the recorded step together (its times are from there); an enqueued step
  // needs no barrier (its receives order it), and NCCL's would wait on the host.
  if (record) comm_.barrier(compute_);
  const auto start = mark();
  for (const PipeStep& step : schedule.steps.at(s)) {
    const int j = step.micro;
    switch (step.op) {
      case PipeOp::F: {
        Buffer in, out;
        const void* x = s == 0 && !inputs.empty() ? inputs.at(j) : nullptr;
        if (s > 0) {
          in = alloc_.allocate(bytes, MemTag::buffers, compute_);
          comm_.recv(in.data(), count, act, s - 1, compute_);
          x = in.data();
        }
        void* y = nullptr;
        if (s < P - 1) y = (out = alloc_.allocate(bytes, MemTag::buffers, compute_)).data();
        else if (!outputs.empty()) y = outputs.at(j);
        auto b = mark();
        {
          ScopedRange r("pipe.fwd", compute_);
          stage_.forward(j, x, y, rows, compute_);
        }
        auto e = mark();
        if (s < P - 1) send_after(out, *e, s + 1);
        timed.push_back({step, std::move(b), std::move(e)});
        break;
      }
      case PipeOp::B: {
        Buffer grad_in, grad_out = alloc_.allocate(bytes, MemTag::buffers, compute_);
        const void* dy = s == P - 1 && !output_grads.empty() ? output_grads.at(j) : nullptr;
        if (s < P - 1) {
          grad_in = alloc_.allocate(bytes, MemTag::buffers, compute_);
          backward_->recv(grad_in.data(), count, act, s + 1, compute_);
          dy = grad_in.data();
        }
        auto b = mark();
        {
          ScopedRange r("pipe.bwd", compute_);
          if (split)
            stage_.backward_input(j, dy, grad_out.data(), compute_);
          else
            stage_.backward(j, dy, grad_out.data(), compute_);
        }
        auto e = mark();
        if (s > 0) send_after(grad_out, *e, s - 1);
        timed.push_back({step, std::move(b), std::move(e)});
        break;
      }
      case PipeOp::W: {
        auto b = mark();
        {
          ScopedRange r("pipe.wgrad", compute_);
          stage_.backward_weight(j, compute_);
        }
        timed.push_back({step, std::move(b), mark()});
        break;
      }
    }
  }
  const auto stop = mark();
  if (!record) {
    // No host wait: the compute stream (whose pool the sent buffers return to, in its order)
    // waits for the last send instead; this step's receives are all enqueued, so it completes.
    // (Where nothing was sent, the send stream is not part of the step, nor of its capture.)
    if (sent_any) {
      Event sent(dev_.backend());
      sent.record(send_);
      sent.make_wait(compute_);
    }
    in_flight.clear();
    return {};
  }
  send_.synchronize();
  compute_.synchronize();
  in_flight.clear();

  PipelineStepRecord rec;
  for (const Timed& t : timed) {
    const double b = Event::elapsed_ms(*start, *t.begin), e = Event::elapsed_ms(*start, *t.end);
    rec.ops.push_back({t.step, b, e});
    rec.busy_ms += e - b;
  }
  // The step ends when its slowest stage does.
  Buffer span = alloc_.allocate(sizeof(float), MemTag::temporary, compute_);
  float mine = float(Event::elapsed_ms(*start, *stop));
  dev_.copy_to_device(span.data(), &mine, sizeof(float), compute_);
  comm_.all_reduce(span.data(), span.data(), 1, DType::f32, ReduceOp::max, compute_);
  dev_.copy_to_host(&mine, span.data(), sizeof(float), compute_);
  compute_.synchronize();
  rec.makespan_ms = mine;
  return rec;
}

}  // namespace moebench
