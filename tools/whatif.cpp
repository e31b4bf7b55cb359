// moebench_whatif: a user's own cluster and layout through the training-step model -- projected
// step time, throughput, memory per GPU (or OOM) and the breakdown -- as CSV (modelled, never
// measured). E.g.
//   moebench_whatif --profile h100-node --model gpt3-6.7b --layout ppmoe --tp 8 --pp 4 --dp 2
//       --micro-batches 16 --out whatif.csv
#include <cstdio>
#include "harness/tool_command_line.h"
#include "harness/output_check.h"
#include "models/layout_rules.h"
#include "models/paper_specs.h"
#include "tools/projection.h"

using namespace moebench;

int main(int argc, char** argv) {
  ToolCommandLine command_line(
      "moebench_whatif", "Projected training step of a GPT model (dense or MoE) in a DP x TP x PP layout on a hardware profile.");
  CLI::App& app = command_line.app();
  std::string profile, model = "gpt3-medium", layout = layout_table().front().option,
              schedule = schedule_name(PipelineScheduleKind::one_f_one_b), out, dtype = "fp16";
  std::optional<int> gpus, dp, tp, pp, micro, micro_size, experts, moe_every, top_k, layers, hidden, ffn, heads, seq, vocab,
      zero_stage;
  std::optional<double> capacity;
  bool zero = false, recompute = false;
  make_required(add_path(app, "--profile", profile, "Hardware profile: a name (" + [] {
    std::string s;
    for (const auto& n : shipped_profiles()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }() + ") or a profile CSV"));
  std::vector<std::string> names;
  for (const auto& m : model_specs()) names.push_back(m.name);
  add_choice(app, "--model", model, names, "The model's shape (default gpt3-medium); --layers etc. override it");
  add_choice(app, "--layout", layout, layout_options(), "Where the experts live: " + layout_options_help() + " (default " + layout + ")");
  add_whole(app, "--gpus", gpus, 1, 1 << 24, "GPUs of the cluster: checks that --dp x --tp x --pp uses them all");
  add_whole(app, "--dp", dp, 1, 1 << 20, "Data-parallel size (default 1)");
  add_whole(app, "--tp", tp, 1, 1024, "Tensor-parallel size (default 1)");
  add_whole(app, "--pp", pp, 1, 1 << 12, "Pipeline stages (default 1)");
  add_flag(app, "--zero", zero, "ZeRO over the DP group");
  add_whole(app, "--zero-stage", zero_stage, 1, 2, "ZeRO stage with --zero: 1 optimizer states, 2 and gradients (default 1)");
  add_whole(app, "--micro-batches", micro, 1, 1 << 20, "Micro-batches per step (default 1)");
  add_whole(app, "--micro-batch-size", micro_size, 1, 1 << 20, "Sequences per micro-batch (default 1)");
  add_choice(app, "--schedule", schedule, schedule_names(), "Pipeline schedule (default " + schedule + ")");
  add_flag(app, "--recompute", recompute, "Recompute activations in backward");
  add_choice(app, "--dtype", dtype, {"fp16", "bf16", "fp32"}, "Weights and activations (default fp16)");
  add_whole(app, "--experts", experts, 1, 1 << 20, "Experts per MoE layer (default: the model's)");
  add_whole(app, "--moe-every", moe_every, 1, 1 << 10, "An MoE layer every N FFNs (default: the model's)");
  add_whole(app, "--top-k", top_k, 1, 1 << 10, "Experts per token (default 1)");
  add_real(app, "--capacity-factor", capacity, above(0), "Expert capacity factor (default dropless)");
  add_whole(app, "--layers", layers, 1, 1 << 12, "Layers (default: the model's)");
  add_whole(app, "--hidden", hidden, 1, 1 << 20, "Hidden size (default: the model's)");
  add_whole(app, "--ffn", ffn, 1, 1 << 22, "FFN size (default: the model's)");
  add_whole(app, "--heads", heads, 1, 1 << 12, "Attention heads (default: the model's)");
  add_whole(app, "--seq", seq, 1, 1 << 22, "Sequence length (default: the model's, else 2048)");
  add_whole(app, "--vocab", vocab, 1, 1 << 24, "Vocabulary (default: the --model spec's)");
  add_path(app, "--out", out, "CSV to write (default: print only)");
  if (const std::optional<int> exit_code = command_line.parse(argc, argv)) return *exit_code;
  try {
    if (!out.empty())
      if (auto e = check_output_file("--out", out)) throw Error(*e);
    const HardwareProfile hw = load_profile_option("--profile", profile);
    const ModelSpec& spec = model_spec(model);
    ModelShape m = spec.shape.dense();
    m.layers = layers.value_or(m.layers);
    m.hidden = hidden.value_or(m.hidden);
    m.ffn = ffn.value_or(hidden ? 4 * *hidden : m.ffn);
    m.heads = heads.value_or(m.heads);
    m.seq = seq.value_or(m.seq > 0 ? m.seq : 2048);
    m.vocab = vocab.value_or(m.vocab);
    StepLayout l;
    l.kind = *parse_layout_option(layout);
    if (layout_row(l.kind).experts_over != ExpertGroup::none) {
      m.experts = experts.value_or(spec.shape.experts);
      m.moe_every = moe_every.value_or(spec.shape.moe_every > 0 ? spec.shape.moe_every : 2);
      m.top_k = top_k.value_or(1);
      m.capacity_factor = capacity.value_or(0);
    } else if (experts || moe_every || top_k || capacity) {
      std::string with_experts;
      for (const LayoutRow& r : layout_table())
        if (r.experts_over != ExpertGroup::none) with_experts += (with_experts.empty() ? "" : " or ") + std::string(r.option);
      throw Error("--layout " + layout + ": --experts, --moe-every, --top-k and --capacity-factor need --layout " + with_experts);
    }
    l.dp = dp.value_or(1);
    l.tp = tp.value_or(1);
    l.pp = pp.value_or(1);
    l.zero = zero;
    if (zero_stage && !zero) throw Error("--zero-stage: given without --zero");
    l.zero_stage = zero_stage.value_or(1);
    l.micro_batches = micro.value_or(1);
    l.micro_batch_sequences = micro_size.value_or(1);
    l.schedule = *parse_schedule(schedule);
    l.recompute = recompute;
    l.half = dtype != "fp32";
    if (gpus && *gpus != l.world())
      throw Error("--gpus: " + std::to_string(*gpus) + " GPUs, but --dp " + std::to_string(l.dp) + " x --tp " +
                  std::to_string(l.tp) + " x --pp " + std::to_string(l.pp) + " = " + std::to_string(l.world()));
    // The trainer's rules, in its words (the step model also prices expert replicas, for 000's
    // paper-scale rows): a layout the suite cannot train is not projected.
    if (auto e = trainer_layout_error(m, l.kind, l.dp, l.tp, l.pp)) throw Error(*e);
    if (auto e = validate_step(m, l, hw)) throw Error(*e);
    const StepPrediction p = predict_step(m, l, hw);
    const ForwardParts& f = p.forward;
    CsvTable t({"quantity", "value", "unit"});
    auto row = [&](const std::string& q, double v, const std::string& u) { t.add_row({q, fmt(v, 5), u}); };
    t.add_row({"layout", l.describe(), ""});
    t.add_row({"fits_memory", p.fits ? "yes" : "no (OOM)", ""});
    row("step", p.step * 1e3, "ms");
    row("tokens_per_s_per_gpu", p.tokens_per_s_per_gpu, "tokens/s");
    row("pipeline", p.pipeline * 1e3, "ms");
    row("bubble", p.bubble, "fraction");
    row("dp_sync", p.dp_sync * 1e3, "ms");
    row("optimizer", p.optimizer * 1e3, "ms");
    row("stage_forward", p.stage_f * 1e3, "ms per micro-batch");
    row("stage_backward_input", p.stage_b * 1e3, "ms per micro-batch");
    row("stage_backward_weight", p.stage_w * 1e3, "ms per micro-batch");
    row("send", p.send * 1e3, "ms per activation");
    for (auto [q, v] : {std::pair{"fwd_attention", f.attention}, {"fwd_attention_allreduce", f.attention_allreduce},
                        {"fwd_ffn", f.ffn}, {"fwd_ffn_allreduce", f.ffn_allreduce}, {"fwd_moe_gating", f.moe_gating},
                        {"fwd_moe_dispatch", f.moe_dispatch}, {"fwd_moe_expert", f.moe_expert},
                        {"fwd_moe_combine", f.moe_combine}, {"fwd_other", f.other}})
      row(q, v * 1e3, "ms per micro-batch");
    row("params_per_gpu", p.params_per_gpu, "parameters");
    row("model_states", p.model_state_bytes / 1e9, "GB");
    row("activations", p.activation_bytes / 1e9, "GB");
    row("memory_per_gpu", (p.model_state_bytes + p.activation_bytes) / 1e9, "GB");
    row("profile_memory", hw.memory_bytes / 1e9, "GB");
    std::printf("%s", t.to_string(nullptr).c_str());
    if (!out.empty()) {
      t.write(out, model_provenance(hw, l.world(), "whatif", l.half ? "fp16" : "fp32"));
      std::printf("wrote %s\n", out.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "moebench_whatif: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
