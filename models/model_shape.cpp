#include "models/model_shape.h"

namespace moebench {

double ModelShape::parameters() const {
  const double h = hidden, f = ffn;
  double p = double(vocab) * h + double(seq) * h + 2 * h;  // embeddings (the output layer is tied), final LayerNorm
  for (int i = 0; i < layers; ++i) {
    p += 4 * h * h + 4 * h + 4 * h;  // attention, two LayerNorms
    p += is_moe(i) ? h * experts + experts * (2 * h * f + f + h) : 2 * h * f + f + h;
  }
  return p;
}

}  // namespace moebench
