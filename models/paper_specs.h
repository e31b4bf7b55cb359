// The papers' models and MoE layers as data, in one place that benches, tests and the
// performance models read, each with where it comes from:
//   000 (PPMoE) Sec. 4: GPT-3 Medium and GPT-3 6.7B backbones, 64 experts on every other FFN,
//       top-1, sequence length 2048, fp16 with an fp32 gate, 18 bytes of Adam state per parameter;
//   001 (M6-T) Table 3: the 3-layer, 16-layer, 100B and 1T models (hidden, intermediate,
//       layers, heads, experts, GPUs, optimizer, learning rate), batch 8 per GPU, capacity 1.25;
//   003 (MPMoE) Table 3: the MoE layers of GPT-S, GPT-XL and BERT-L, 64 or 16 experts.
// A field a paper does not give is 0 (or empty).
#pragma once
#include <string>
#include <vector>
#include "models/model_shape.h"

namespace moebench {

struct ModelSpec {
  std::string name;         // e.g. "gpt3-medium"
  std::string source;       // e.g. "000 Sec. 4.1"
  ModelShape shape;         // as the paper gives it (its sequence length: 0 where it gives none)
  std::string vocab_source; // where shape.vocab comes from (a paper gives one, or an assumption)
  int gpus = 0;             // the paper's cluster for it
  int batch_per_gpu = 0;
  std::string optimizer;
  double learning_rate = 0;
};

struct MoELayerSpec {
  std::string name;         // e.g. "gpt-xl"
  std::string source;
  int hidden = 0, ffn = 0;
  std::vector<int> experts; // the expert counts the paper runs it with
};

const std::vector<ModelSpec>& model_specs();
const std::vector<MoELayerSpec>& moe_layer_specs();
// By name; throws Error listing the names there are.
const ModelSpec& model_spec(const std::string& name);
const MoELayerSpec& moe_layer_spec(const std::string& name);

}  // namespace moebench
