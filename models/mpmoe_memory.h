// MPMoE's memory model (003 Sec. 2.2.2 and 3.3, Eq. 1-6), in elements, for one device of an
// expert-parallel MoE layer with B tokens, model dimension M, hidden dimension H and E experts
// (one expert per device, as the paper's Eq. 1 counts):
//   (1) M_ms  = 4 (E M + 2 H M)            parameters, gradients and Adam's two moments
//   (2) M_act = 4 B M + B H                T_I, T_DI, T_DO, T_O (B x M each) and T_M (B x H)
//   (3) M_buf = B M + B H                  the two adjacent gradient temporaries of backward
//   (4) M_buf^pipe = M_act^pipe = 4 B M + B H
//   (5) dM_buf = dM_act = B (2 M (n-2)/n + H (n-1)/n)   saved by sharing T_DI (two buffers),
//                                                       T_M (one) and T_DO (two) among n parts
//   (6) phi = (dM_act + dM_buf) / (M_ms + M_act^pipe + M_buf^pipe)
// The paper leaves out routing data (one to two orders of magnitude smaller) and fragmentation;
// a measurement beside it names both rather than leaving them in a residue.
#pragma once

namespace moebench {

struct MemoryModelInput {
  double tokens = 0;        // B
  double model_dim = 0;     // M
  double hidden_dim = 0;    // H
  double experts = 0;       // E (gate parameters E M)
  double local_experts = 1; // experts held by the device (the paper: 1)
  int partitions = 1;       // n
};

struct MemoryModel {
  double model_states = 0;           // Eq. 1
  double activations = 0;            // Eq. 2
  double buffers = 0;                // Eq. 3
  double activations_pipe = 0;       // Eq. 4
  double buffers_pipe = 0;           // Eq. 4
  double saving_activations = 0;     // Eq. 5
  double saving_buffers = 0;         // Eq. 5
  double saving_ratio = 0;           // Eq. 6, phi
};

// Elements; multiply by the element size for bytes.
MemoryModel mpmoe_memory_model(const MemoryModelInput& in);

}  // namespace moebench
