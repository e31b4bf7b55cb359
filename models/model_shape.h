// The one description of a model's size: a GPT-style decoder (token and position embeddings,
// `layers` blocks of attention and FFN, the output layer tied to the token embedding), with an
// MoE layer in place of every `moe_every`-th FFN when it has experts. The papers' models are
// ModelSpecs holding one (models/paper_specs.h); the step model predicts one; the transformer is
// built from one (gpt/gpt_stage.h gpt_config()).
#pragma once

namespace moebench {

struct ModelShape {
  int layers = 0, hidden = 0, ffn = 0, heads = 0, seq = 0, vocab = 0;
  int experts = 0;     // per MoE layer; 0: dense
  int moe_every = 0;   // layers k - 1, 2k - 1, ... are MoE (2: every other FFN); 0: none
  int top_k = 1;       // inside each prototype
  int prototypes = 1;  // M6-T's expert prototyping; 1: plain top-k
  double capacity_factor = 0;  // M6-T Eq. 2's gamma; 0: dropless
  bool has_moe() const { return experts > 0 && moe_every > 0; }
  bool is_moe(int layer) const { return has_moe() && layer % moe_every == moe_every - 1; }
  // The same model with plain FFNs everywhere.
  ModelShape dense() const {
    ModelShape d = *this;
    d.experts = d.moe_every = 0;
    d.top_k = d.prototypes = 1;
    d.capacity_factor = 0;
    return d;
  }
  double parameters() const;  // the whole model's
};

}  // namespace moebench
