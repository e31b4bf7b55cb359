#include "models/mpmoe_memory.h"

namespace moebench {

MemoryModel mpmoe_memory_model(const MemoryModelInput& in) {
  const double B = in.tokens, M = in.model_dim, H = in.hidden_dim, E = in.experts, n = in.partitions;
  MemoryModel m;
  m.model_states = 4 * (E * M + in.local_experts * 2 * H * M);
  m.activations = 4 * B * M + B * H;
  m.buffers = B * M + B * H;
  m.activations_pipe = 4 * B * M + B * H;
  m.buffers_pipe = m.activations_pipe;
  m.saving_activations = B * (2 * M * (n - 2) / n + H * (n - 1) / n);
  m.saving_buffers = m.saving_activations;
  m.saving_ratio = (m.saving_activations + m.saving_buffers) / (m.model_states + m.activations_pipe + m.buffers_pipe);
  return m;
}

}  // namespace moebench
