// What the pipeline engine runs on a rank: one stage, its micro-batches' forward and backward
// (whole, or split into the input gradient B and the weight gradient W for the zero-bubble
// schedules). Activations between stages are [rows, width] in the stage's activation dtype.
#pragma once
#include "kernels/dtype.h"
#include "runtime/stream.h"

namespace moebench {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  // Columns of the activations it receives and sends.
  virtual int width() const = 0;
  // The element type of those activations and their gradients.
  virtual DType activation_dtype() const { return DType::f32; }
  // x: the previous stage's output (the first stage may take its input from elsewhere: x may
  // be null there); y: this stage's output (the last stage's output is its own business).
  virtual void forward(int micro, const void* x, void* y, int rows, const Stream& s) = 0;
  // dy: the next stage's input gradient (null on the last stage, which starts from its loss).
  virtual void backward_input(int micro, const void* dy, void* dx, const Stream& s) = 0;
  virtual void backward_weight(int micro, const Stream& s) = 0;
  virtual void backward(int micro, const void* dy, void* dx, const Stream& s) {
    backward_input(micro, dy, dx, s);
    backward_weight(micro, s);
  }
};

}  // namespace moebench
