#include "models/paper_specs.h"
#include "kernels/exec.h"

namespace moebench {

const std::vector<ModelSpec>& model_specs() {
  static const std::vector<ModelSpec> specs = [] {
    std::vector<ModelSpec> v;
    ModelSpec m;
    // 000 Sec. 4.1: "GPT-3 Medium with 350M parameters (24 layers, 1024 hidden size, 16 attention
    // heads) and GPT-3 6.7B (32 layers, 4096 hidden size, 32 attention heads) ... scale them with
    // 64 experts on every other FFNs"; top-1; sequence length 2,048; FFN 4h as in GPT-3.
    // 000 gives no vocabulary: GPT-2's BPE (50257) padded to a multiple of 128, as Megatron pads it.
    const char* gpt2_vocab = "assumed: GPT-2's BPE padded as Megatron pads it (000 gives none)";
    m = {};
    m.name = "gpt3-medium"; m.source = "000 Sec. 4.1";
    m.shape = {.layers = 24, .hidden = 1024, .ffn = 4096, .heads = 16, .seq = 2048, .vocab = 50304,
               .experts = 64, .moe_every = 2};
    m.vocab_source = gpt2_vocab;
    m.optimizer = "Adam (fp16, fp32 master)"; m.learning_rate = 1.2e-4;
    v.push_back(m);
    m = {};
    m.name = "gpt3-6.7b"; m.source = "000 Sec. 4.1";
    m.shape = {.layers = 32, .hidden = 4096, .ffn = 16384, .heads = 32, .seq = 2048, .vocab = 50304,
               .experts = 64, .moe_every = 2};
    m.vocab_source = gpt2_vocab;
    m.optimizer = "Adam (fp16, fp32 master)";
    v.push_back(m);
    // 001 Table 3 (and A.2: batch 8 per GPU, capacity factor 1.25, a vocabulary of 21128
    // subwords); 001 gives no sequence length for them.
    auto m6t = [&](const char* name, int hidden, int ffn, int layers, int heads, int experts, int gpus,
                   const char* optimizer, double lr) {
      ModelSpec s;
      s.name = name; s.source = "001 Table 3";
      s.shape = {.layers = layers, .hidden = hidden, .ffn = ffn, .heads = heads, .seq = 0, .vocab = 21128,
                 .experts = experts, .moe_every = 1, .capacity_factor = 1.25};
      s.vocab_source = "001 A.2";
      s.gpus = gpus; s.batch_per_gpu = 8;
      s.optimizer = optimizer; s.learning_rate = lr;
      v.push_back(s);
    };
    m6t("m6t-3layer", 128, 512, 3, 8, 4096, 8, "AdamW", 1e-4);
    m6t("m6t-16layer", 128, 512, 16, 8, 4096, 8, "AdamW", 1e-4);
    m6t("m6t-100b", 1024, 4096, 24, 16, 512, 128, "AdamW", 8e-5);
    m6t("m6t-1t", 1024, 21248, 24, 16, 960, 480, "Adafactor", 5e-3);
    return v;
  }();
  return specs;
}

const std::vector<MoELayerSpec>& moe_layer_specs() {
  // 003 Table 3: "Specifications of MoE layers" (d_model, d_hidden, #experts 64/16).
  static const std::vector<MoELayerSpec> specs = {
      {"gpt-s", "003 Table 3", 768, 3072, {64, 16}},
      {"gpt-xl", "003 Table 3", 2048, 8192, {64, 16}},
      {"bert-l", "003 Table 3", 1024, 4096, {64, 16}},
  };
  return specs;
}

template <class T>
static const T& find(const std::vector<T>& all, const std::string& name, const char* what) {
  std::string names;
  for (const T& s : all) {
    if (s.name == name) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  throw Error(std::string("no ") + what + " '" + name + "'; there are: " + names);
}

const ModelSpec& model_spec(const std::string& name) { return find(model_specs(), name, "model spec"); }
const MoELayerSpec& moe_layer_spec(const std::string& name) { return find(moe_layer_specs(), name, "MoE layer spec"); }

}  // namespace moebench
