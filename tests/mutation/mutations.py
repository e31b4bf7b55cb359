"""The bugs scripts/mutation_check.py plants, one at a time. Each turns a mechanism into its
neighbour (or breaks a guard) while the outputs stay right, so only a test that looks at the
mechanism kills it.

A bug: id; mechanism (what degenerates, said when it survives); file (under the source root);
edits: (old, new) pairs, each old snippet found exactly once in the file; targets: the build
targets its tests need; tests: a CTest -R regular expression of the tests that must kill it.
"""

UNIT = "moebench_unit_tests"
MPI = "moebench_mpi_tests"
PIPE = "moebench_mpi_pipeline_tests"
CLI = "moebench_cli_tests"
PIPE_TESTS = r"^mpi\.pipeline\.ranks"
COMM_TESTS = r"^mpi\.comm\.ranks"

MUTATIONS = [
    # Schedules (pipeline/, models/pipeline_schedule.cpp)
    {
        "id": "zb_h1_is_1f1b",
        "mechanism": "ZB-H1 became 1F1B: B runs the whole backward, W does nothing",
        "file": "pipeline/pipeline_engine.cpp",
        "edits": [
            ("          if (split)\n            stage_.backward_input(j, dy, grad_out.data(), compute_);\n"
             "          else\n            stage_.backward(j, dy, grad_out.data(), compute_);",
             "          stage_.backward(j, dy, grad_out.data(), compute_);"),
            ("          stage_.backward_weight(j, compute_);", "          (void)j;"),
        ],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "zb_h1_b_holds_w",
        "mechanism": "ZB-H1's B computes the weight gradients and W only frees the micro-batch",
        "file": "pipeline/mlp_stage.cpp",
        "edits": [
            ("  m.h.clear();  // W needs x, a, dy and dh",
             "  for (int l = 0; l < cfg_.layers; ++l) {\n"
             "    gemm(ex, dense_gemm(true, false, F, H, m.rows, m.a[l].data(), m.dy[l].data(), w(dw2_, l, per), DType::f32, 1.f, 1.f));\n"
             "    gemm(ex, dense_gemm(true, false, H, F, m.rows, m.x[l].data(), m.dh[l].data(), w(dw1_, l, per), DType::f32, 1.f, 1.f));\n"
             "  }\n  m.h.clear();"),
            ("  for (int l = 0; l < cfg_.layers; ++l) {\n    gemm(ex, dense_gemm(true, false, F, H, m.rows, m.a[l].data(), m.dy[l].data(), "
             "w(dw2_, l, per), DType::f32, 1.f, 1.f));\n    gemm(ex, dense_gemm(true, false, H, F, m.rows, m.x[l].data(), "
             "m.dh[l].data(), w(dw1_, l, per), DType::f32, 1.f, 1.f));\n  }\n  held_.erase(it);",
             "  (void)H; (void)F; (void)per; (void)ex;\n  held_.erase(it);"),
        ],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "gpt_zb_h1_is_1f1b",
        "mechanism": "the transformer blocks ignore the deferral: ZB-H1's B runs their weight-gradient GEMMs",
        "file": "pipeline/transformer_block.cpp",
        "edits": [("  std::vector<WeightTask>* later = defer ? &c.weight_tasks : nullptr;",
                   "  std::vector<WeightTask>* later = nullptr;\n  (void)defer;")],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "one_f_one_b_is_gpipe",
        "mechanism": "1F1B became GPipe: every forward before the first backward",
        "file": "models/pipeline_schedule.cpp",
        "edits": [("  const int warmup = std::min(P - s - 1, M);", "  const int warmup = M;")],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "recompute_keeps_everything",
        "mechanism": "recomputation keeps every activation and reruns nothing",
        "file": "pipeline/mlp_stage.cpp",
        "edits": [
            ("  if (cfg_.recompute) {  // keep the stage input alone", "  if (false) {  // keep the stage input alone"),
            ("  if (cfg_.recompute) {\n    ScopedRange r(\"pipe.recompute\", s);", "  if (false) {\n    ScopedRange r(\"pipe.recompute\", s);"),
        ],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    # MPMoE's memory reuse (moe/pipelined_layer.*)
    {
        "id": "s2_is_s1",
        "mechanism": "S2 behaves as S1: it offloads T_DI instead of re-sending it",
        "file": "moe/pipelined_layer.h",
        "edits": [("inline bool offloads_rows(MemoryReuse r) { return r == MemoryReuse::s1 || r == MemoryReuse::s3; }",
                   "inline bool offloads_rows(MemoryReuse r) { return r == MemoryReuse::s1 || r == MemoryReuse::s2 || r == MemoryReuse::s3; }")],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "s3_also_offloads_tm",
        "mechanism": "S3 offloads T_M as well as recomputing it",
        "file": "moe/pipelined_layer.h",
        "edits": [("inline bool offloads_middle(MemoryReuse r) { return r == MemoryReuse::s1 || r == MemoryReuse::s2; }",
                   "inline bool offloads_middle(MemoryReuse r) { return r == MemoryReuse::s1 || r == MemoryReuse::s2 || r == MemoryReuse::s3; }")],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "reuse_keeps_a_third_buffer",
        "mechanism": "memory reuse shares T_DI and T_DO among three buffers, not two (peak above Eq. 5)",
        "file": "moe/pipelined_layer.cpp",
        "edits": [("    if (sharing && i >= 2) {", "    if (sharing && i >= 3) {")],
        "targets": [UNIT],
        "tests": r"^MPMoEMemory\.",
    },
    {
        "id": "overlap_lost",
        "mechanism": "the dispatch of part i+1 waits for the experts of part i (no overlap)",
        "file": "moe/pipelined_layer.cpp",
        "edits": [("  auto exchange = [&](Part& p) {  // S; the host waits here for the part's counts\n",
                   "  auto exchange = [&](Part& p) {  // S; the host waits here for the part's counts\n"
                   "    join(dev_.backend(), st.dispatch, {&cs});\n")],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    {
        "id": "fastermoe_order_reversed",
        "mechanism": "the FasterMoE-style split sends to group (mine - k) at step k",
        "file": "moe/pipelined_layer.cpp",
        "edits": [("    const int target = (mine + k) % m;", "    const int target = (mine + m - k) % m;")],
        "targets": [PIPE],
        "tests": PIPE_TESTS,
    },
    # The emulated link (runtime/comm*.cpp, runtime/precise_sleep.cpp)
    {
        "id": "link_ignores_a2av_bytes",
        "mechanism": "the emulated link ignores all_to_all_v's bytes (the MoE exchange)",
        "file": "runtime/comm_mpi.cpp",
        "edits": [("    run(s, \"all_to_all_v (mpi)\", std::max(sent, received), [=, this] {",
                   "    (void)sent; (void)received;\n    run(s, \"all_to_all_v (mpi)\", 0.0, [=, this] {")],
        "targets": [MPI],
        "tests": COMM_TESTS,
    },
    {
        "id": "link_halves_reduce_scatter",
        "mechanism": "the emulated link books half of reduce_scatter's bus bytes",
        "file": "runtime/comm_mpi.cpp",
        "edits": [("    const double bus = double(bytes_of(n, t)) * (size_ - 1);",
                   "    const double bus = double(bytes_of(n, t)) * (size_ - 1) / 2;")],
        "targets": [MPI],
        "tests": COMM_TESTS,
    },
    {
        "id": "link_ignores_send",
        "mechanism": "the emulated link lets point-to-point sends through without their bytes",
        "file": "runtime/comm_mpi.cpp",
        "edits": [("    run(s, \"send (mpi)\", double(bytes_of(count, t)), [=, this] {",
                   "    run(s, \"send (mpi)\", 0.0, [=, this] {")],
        "targets": [MPI],
        "tests": COMM_TESTS,
    },
    {
        "id": "link_double_wait",
        "mechanism": "the emulated link waits for the wire twice (time far above the link's)",
        "file": "runtime/comm.cpp",
        "edits": [("  return clock->busy_until + latency;", "  return clock->busy_until + latency + wire;")],
        "targets": [MPI],
        "tests": COMM_TESTS,
    },
    {
        "id": "lateness_cap_removed",
        "mechanism": "the planned wake-up lateness has no cap (a busy calibration spins every wait)",
        "file": "runtime/precise_sleep.cpp",
        "edits": [("  return std::min<Clock::duration>(median, kMaxWakeUpLateness);", "  return median;")],
        "targets": [UNIT],
        "tests": r"^PreciseSleep\.",
    },
    # The watchdog (runtime/watchdog.cpp)
    {
        "id": "watchdog_fires_at_5x",
        "mechanism": "the watchdog fires at 5x its timeout",
        "file": "runtime/watchdog.cpp",
        "edits": [("      if (waited > limit && slot.operation.load() == op) {",
                   "      if (waited > 5 * limit && slot.operation.load() == op) {")],
        "targets": [UNIT, CLI],
        "tests": r"^(Watchdog|CommBenchCli\.StoppedRank)",
    },
    {
        "id": "watchdog_skips_last_slot",
        "mechanism": "the watcher never looks at the last of its 64 slots",
        "file": "runtime/watchdog.cpp",
        "edits": [("    for (Slot& slot : s.slots) {\n",
                   "    for (Slot& slot : s.slots) {\n      if (&slot == &s.slots.back()) continue;\n")],
        "targets": [UNIT],
        "tests": r"^Watchdog",
    },
    {
        "id": "watchdog_blocks_when_full",
        "mechanism": "an operation started while every slot is taken waits for a free one",
        "file": "runtime/watchdog.cpp",
        "edits": [("  // More operations in flight than slots: this one goes unwatched rather than blocking.\n  ++s.unwatched;",
                   "  std::this_thread::sleep_for(std::chrono::seconds(2));\n  ++s.unwatched;")],
        "targets": [UNIT],
        "tests": r"^Watchdog",
    },
    # Bench smoke runs: judged by what they wrote (tests/cli/bench_smoke.py)
    {
        "id": "csv_nan_from_a_fresh_buffer",
        "mechanism": "a bench reads a buffer that holds nothing yet (NaN in the poison mode) into its CSV, exit 0",
        "file": "bench/m6t_cv.cpp",
        "edits": [("    const auto w = host_f32(ctx.device, ctx.alloc, r.weight.data(), std::size_t(r.tokens()) * S, DType::f32);",
                   "    Buffer fresh = ctx.alloc.allocate(std::size_t(r.tokens()) * S * 4, MemTag::temporary);\n"
                   "    const auto w = host_f32(ctx.device, ctx.alloc, fresh.data(), std::size_t(r.tokens()) * S, DType::f32);")],
        "targets": ["moebench_m6t_cv"],
        "tests": r"^bench\.moebench_m6t_cv\.tiny$",
    },
    {
        "id": "csv_column_renamed",
        "mechanism": "a bench's CSV loses a column users read (renamed)",
        "file": "bench/ppmoe_serial.cpp",
        "edits": [('    CsvTable t({"width", "hidden",', '    CsvTable t({"width", "hidden_size",')],
        "targets": ["moebench_ppmoe_serial"],
        "tests": r"^bench\.moebench_ppmoe_serial\.tiny$",
    },
    {
        "id": "project_exit_code_lost",
        "mechanism": "moebench_project writes everything, prints every 'wrote' line, then exits 3",
        "file": "tools/project.cpp",
        "edits": [("    return 2;\n  }\n  return 0;\n}", "    return 2;\n  }\n  return 3;\n}")],
        "targets": ["moebench_project", "moebench_profile"],
        "tests": r"^(bench\.profile\.tiny\.ranks2|tools\.project\.with_tiny_profile)$",
    },
    # What the assumptions decide (tools/assumption_sensitivity.cpp, the ledger)
    {
        "id": "sensitivity_moves_nothing",
        "mechanism": "an assumed input's end is never applied: every claim sits still across every range",
        "file": "tools/assumption_sensitivity.cpp",
        "edits": [("    low.by_key(in.profile) = with_input(base.by_key(in.profile), in, in.low);\n",
                   "    low.by_key(in.profile) = base.by_key(in.profile);\n"),
                  ("    high.by_key(in.profile) = with_input(base.by_key(in.profile), in, in.high);\n",
                   "    high.by_key(in.profile) = base.by_key(in.profile);\n")],
        "targets": [UNIT],
        "tests": r"^AssumptionSensitivity\.",
    },
    {
        "id": "ledger_ignores_a_changed_verdict",
        "mechanism": "a modelled verdict that an input's range changes is reported as resting on nothing",
        "file": "tools/claims/ledger.cpp",
        "edits": [('      if (t.cell(r, "verdict_changes") == "yes") changing.push_back(r);\n', "")],
        "targets": [UNIT],
        "tests": r"^AssumptionSensitivity\.",
    },
    # The roofline and the routing workload (models/roofline.cpp, moe/routing_workload.cpp)
    {
        "id": "roofline_floor_ignores_bytes",
        "mechanism": "the floor is the compute term alone: a memory-bound layer looks far from its floor",
        "file": "models/roofline.cpp",
        "edits": [("  r.floor_ms = 1e3 * std::max(compute, memory);", "  r.floor_ms = 1e3 * compute;")],
        "targets": [UNIT],
        "tests": r"^Roofline\.",
    },
    {
        "id": "popularity_not_steered",
        "mechanism": "--popularity draws each token's expert but never pushes the token: routing stays the gate's own",
        "file": "moe/routing_workload.cpp",
        "edits": [("x[std::size_t(t) * hidden + k] += float(kSteer * token_std * unit[e][k]);",
                   "x[std::size_t(t) * hidden + k] += 0.f * float(kSteer * token_std * unit[e][k]);")],
        "targets": [UNIT],
        "tests": r"^RoutingWorkload\.",
    },
    {
        "id": "gate_reads_back_twice",
        "mechanism": "the gate reads its counts and its aux statistics back in two host copies (two stalls)",
        "file": "moe/gate.cpp",
        "edits": [("  dev_.copy_to_pinned_host(host_read_pinned_.data(), r.host_read_dev.data(), host_words * 4, s);\n  s.synchronize();",
                   "  dev_.copy_to_pinned_host(host_read_pinned_.data(), r.host_read_dev.data(), 2 * ge * 4, s);\n  s.synchronize();\n"
                   "  dev_.copy_to_pinned_host(host_read_pinned_.as<std::int32_t>() + 2 * ge, r.kept_dev() + ge,\n"
                   "                           (host_words - 2 * ge) * 4, s);\n  s.synchronize();")],
        "targets": [MPI],
        "tests": COMM_TESTS,
    },
    # Mixed precision: each tensor against its own bound
    {
        "id": "sixteen_bit_layernorm_beta_grad",
        "mechanism": "the 16-bit LayerNorm's beta gradient is 1.5x too large (a small tensor among large ones)",
        "file": "kernels/layernorm_cpu.cpp",
        "edits": [("    layernorm_backward_cpu(s, in.data(), grad.data(), gamma, mean, rstd, out.data(), dgamma, dbeta);\n",
                   "    layernorm_backward_cpu(s, in.data(), grad.data(), gamma, mean, rstd, out.data(), dgamma, dbeta);\n"
                   "    if (t != DType::f32)\n      for (int c = 0; c < s.cols; ++c) dbeta[c] *= 1.5f;\n")],
        "targets": [UNIT],
        "tests": r"^SixteenBitOnTheCpu\.",
    },
    # The experts' weight gradients (moe/experts.cpp)
    {
        "id": "expert_grads_cleared_then_read",
        "mechanism": "zero_grad clears the expert weight gradients on the device and the first backward reads them (beta 1)",
        "file": "moe/experts.cpp",
        "edits": [("void Experts::zero_grad(const Stream&) { overwrite_grads_ = true; }",
                   "void Experts::zero_grad(const Stream& s) {\n"
                   "  overwrite_grads_ = true;\n"
                   "  dev_.fill_zero(w1_grad_.data(), w1_grad_.bytes(), s);\n"
                   "  dev_.fill_zero(w2_grad_.data(), w2_grad_.bytes(), s);\n}"),
                  ("  const float beta = overwrite_grads_ ? 0.f : 1.f;", "  const float beta = 1.f;")],
        "targets": [UNIT],
        "tests": r"^Experts\.",
    },
    # The experts' padded route (moe/experts_padded.cpp, kernels/pad_rows_cpu.cpp)
    {
        "id": "padded_route_is_grouped",
        "mechanism": "--expert-gemm padded runs the grouped per-expert GEMMs and GeLU kernels",
        "file": "moe/experts.cpp",
        "edits": [("  if (cfg_.expert_gemm == ExpertGemm::padded) {\n    forward_padded(c, y, s);",
                   "  if (false) {\n    forward_padded(c, y, s);"),
                  ("  if (cfg_.expert_gemm == ExpertGemm::padded) return compute_middle_padded(c, s);", ""),
                  ("  if (cfg_.expert_gemm == ExpertGemm::padded) return backward_padded(c, dy, dx, beta, s, keep_grad_h);", "")],
        "targets": [UNIT],
        "tests": r"^PaddedExperts\.",
    },
    {
        "id": "blocked_attention_is_materialized",
        "mechanism": "blocked attention runs the materialized path: P [heads, seq, seq] kept for the backward",
        "file": "pipeline/attention.cpp",
        "edits": [("      if (kernel_ == AttentionKernel::blocked)\n        blocked_forward(c, ctx_heads.data(), s);",
                   "      if (false)\n        blocked_forward(c, ctx_heads.data(), s);"),
                  ("      if (kernel_ == AttentionKernel::blocked)\n        blocked_backward(", "      if (false)\n        blocked_backward(")],
        "targets": [UNIT],
        "tests": r"^BlockedAttention\.",
    },
    {
        "id": "blocked_attention_panels_span_every_key",
        "mechanism": "blocked attention's forward panels meet every key of the sequence, the ones no row sees too",
        "file": "pipeline/attention_blocked.cpp",
        "edits": [("    const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see\n"
                   "    const long long area = (long long)rows * cols;\n    batched_gemm(",
                   "    const int rows = std::min(panel_rows, seq - r0), cols = seq;\n"
                   "    const long long area = (long long)rows * cols;\n    batched_gemm(")],
        "targets": [UNIT],
        "tests": r"^BlockedAttention\.",
    },
    {
        "id": "step_peak_is_what_stays",
        "mechanism": "gpt.step's peak_mib reports the bytes held after the step, not the most held during it",
        "file": "pipeline/gpt_trainer.h",
        "edits": [("std::max(alloc_->peak_total(), captured_peak_); }", "std::max(alloc_->current_total(), captured_peak_); }")],
        "targets": [UNIT],
        "tests": r"^GptTrainerStep\.",
    },
    {
        "id": "padding_rows_left_stale",
        "mechanism": "the padded blocks' padding rows keep what the buffer held instead of zeros",
        "file": "kernels/pad_rows_cpu.cpp",
        "edits": [("    std::memset(block + rows * row, 0, (std::size_t(p.padded) - rows) * row);\n", "")],
        "targets": [UNIT],
        "tests": r"^(PadRows|PaddedExperts)\.",
    },
    {
        "id": "streams_route_on_one_stream",
        "mechanism": "--expert-gemm streams queues every expert GEMM on the layer's own stream",
        "file": "moe/expert_streams.cpp",
        "edits": [("    grouped_gemm(dev_.exec(side_[j]), {g}, ExpertGemm::serial, nullptr, 0);",
                   "    grouped_gemm(dev_.exec(s), {g}, ExpertGemm::serial, nullptr, 0);")],
        "targets": [UNIT],
        "tests": r"^StreamsExperts\.",
    },
    # The transformer MLP's GeLU in its GEMMs' epilogues (pipeline/transformer_block.cpp)
    {
        "id": "mlp_gelu_as_kernels",
        "mechanism": "the transformer MLP runs GeLU and its gradient as kernels of their own after plain GEMMs",
        "file": "pipeline/transformer_block.cpp",
        "edits": [("    if (epilogue_fits(ex, F)) {  // a = GeLU(z)", "    if (false) {  // a = GeLU(z)"),
                  ("    if (epilogue_fits(ex, F)) {  // GeLU's gradient", "    if (false) {  // GeLU's gradient")],
        "targets": [UNIT],
        "tests": r"^GptBlock\.",
    },
    # A training step without host waits (pipeline/gpt_trainer.cpp)
    {
        "id": "gpt_step_waits_on_the_host",
        "mechanism": "the GPT training step records the pipeline's op times, waiting on the host for its own forwards and backwards",
        "file": "pipeline/gpt_trainer.cpp",
        "edits": [("  engine_->enqueue_step(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, layout_.pp, micro_), rows_);",
                   "  engine_->run(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, layout_.pp, micro_), rows_, {}, {}, {});")],
        "targets": [UNIT],
        "tests": r"^GptTrainerStep\.",
    },
    # The optimizer's one pass (pipeline/data_parallel.cpp)
    {
        "id": "optimizer_rounds_in_a_second_pass",
        "mechanism": "a 16-bit parameter's step writes its master only and rounds it into the weight in a pass of its own",
        "file": "pipeline/data_parallel.cpp",
        "edits": [("    for (std::size_t i = 0; i < params_.size(); ++i) adam_.update(i, params_[i].grad->data(), params_[i].dtype, s);\n    return;",
                   "    for (std::size_t i = 0; i < params_.size(); ++i) {\n"
                   "      adam_.update(i, params_[i].grad->data(), params_[i].dtype, s);\n"
                   "      if (params_[i].dtype != DType::f32)\n"
                   "        convert(ex, flat_w_.as<float>() + master_offset_[i], DType::f32, params_[i].weight->data(), params_[i].dtype,\n"
                   "                params_[i].weight->bytes() / 2);\n"
                   "    }\n    return;")],
        "targets": [UNIT],
        "tests": r"^DataParallelAdam\.",
    },
    # GPU tests that cannot hide (checked here with every GPU hidden)
    {
        "id": "gpu_tests_ignore_required",
        "mechanism": "the GPU tests report a missing GPU as skipped although MOEBENCH_REQUIRE_GPU=1",
        "file": "tests/gpu/gpu_test_main.cpp",
        "edits": [('    if (required && std::strcmp(required, "1") == 0) {', '    if (required && false) {')],
        "targets": ["moebench_gpu_tests", "moebench_comm"],
        "tests": r"^gpu\.required_switch$",
    },
    {
        "id": "gpu_smoke_ignores_required",
        "mechanism": "a GPU bench's smoke run reports a missing GPU as skipped although MOEBENCH_REQUIRE_GPU=1",
        "file": "tests/cli/bench_smoke.py",
        "edits": [('        if os.environ.get("MOEBENCH_REQUIRE_GPU") == "1":', '        if False:')],
        "targets": ["moebench_gpu_tests", "moebench_comm"],
        "tests": r"^gpu\.required_switch$",
    },
    # The GPU targets' verdicts (scripts/gpu_targets.py)
    {
        "id": "targets_judge_any_run",
        "mechanism": "a CPU or tiny run is judged met or missed against the H100's paper-scale limits",
        "file": "scripts/gpu_targets.py",
        "edits": [("        elif not comparable:\n", "        elif False:\n")],
        "targets": ["moebench_moe_layer", "moebench_gpt_step", "moebench_profile"],
        "tests": r"^script\.gpu_targets\.tiny$",
    },
    {
        "id": "targets_hide_failed_cases",
        "mechanism": "a GPU-targets case that failed leaves no trace beside the verdicts",
        "file": "scripts/gpu_targets.py",
        "edits": [('                elif c["exit"] != "0":\n', "                elif False:\n")],
        "targets": ["moebench_kernels"],  # nothing to build: the script is Python
        "tests": r"^script\.gpu_targets\.failed_case$",
    },
    # Graphs of a step (runtime/stream_graph.h, runtime/cpu_capture.cpp, the allocator's graph pools)
    {
        "id": "adam_reads_the_host_step",
        "mechanism": "AdamW's bias corrections use the step count frozen when the update was enqueued, so a replayed graph repeats its captured step",
        "file": "kernels/adam_cpu.cpp",
        "edits": [("int step_of(const AdamStep& a) { return a.step_count ? *a.step_count : a.step; }",
                   "int step_of(const AdamStep& a) { return a.step; }")],
        "targets": [UNIT],
        "tests": r"^GptTrainerStep\.",
    },
    {
        "id": "replay_on_one_stream",
        "mechanism": "a graph replay runs every stream's branch on the stream it is launched on, one after another",
        "file": "runtime/cpu_capture.cpp",
        "edits": [("    HostQueue* q = n.queue == origin_ ? onto : n.queue;", "    HostQueue* q = onto;")],
        "targets": [UNIT],
        "tests": r"^StreamGraphTest\.",
    },
    {
        "id": "replay_drops_event_waits",
        "mechanism": "a graph replay drops the captured event waits: its branches are no longer ordered",
        "file": "runtime/cpu_capture.cpp",
        "edits": [("      q->enqueue(\"wait event\", [events, e = &events[n.wait]] { e->wait(); });",
                   "      q->enqueue(\"wait event\", [events] {});")],
        "targets": [UNIT],
        "tests": r"^StreamGraphTest\.",
    },
    {
        "id": "graph_blocks_back_to_the_pool",
        "mechanism": "a block freed in a capture goes back to the shared pool, where work outside the graph is given what every replay writes",
        "file": "runtime/allocator.cpp",
        "edits": [("    graph_free[b->graph].emplace(b->size, b);\n  }", "    free_lists[b->owner.id].emplace(b->size, b);\n  }")],
        "targets": [UNIT],
        "tests": r"^StreamGraphTest\.",
    },
    {
        "id": "targets_ignore_deadline",
        "mechanism": "the GPU targets start every case however late, so a lease's call is cut off before the verdicts",
        "file": "scripts/gpu_targets.sh",
        "edits": [('  if [ -n "$deadline" ] && [ "$(date +%s)" -ge "$deadline" ]; then', "  if false; then")],
        "targets": ["moebench_moe_layer", "moebench_gpt_step", "moebench_profile"],
        "tests": r"^script\.gpu_targets\.deadline$",
    },
    # The fused attention's graphs (kernels/sdpa_graph.cpp, kernels/sdpa.cpp)
    {
        "id": "fused_attention_sees_the_future",
        "mechanism": "the fused attention's graph loses its causal mask: each row also attends to later keys",
        "file": "kernels/sdpa_graph.cpp",
        "edits": [("    return pointwise(SdpaPointwise::binary_select, scaled, lowest, like(\"masked_scores\", scaled), ge.y);",
                   "    return pointwise(SdpaPointwise::binary_select, scaled, scaled, like(\"masked_scores\", scaled), ge.y);")],
        "targets": [UNIT],
        "tests": r"^Fused",
    },
    {
        "id": "fused_dq_accumulates_across_runs",
        "mechanism": "dQ's fp32 accumulator is not zeroed before a backward, so each run adds onto the last",
        "file": "kernels/sdpa.cpp",
        "edits": [("    if (dq_accum) std::fill_n(", "    if (false) std::fill_n(")],
        "targets": [UNIT],
        "tests": r"^FusedAttentionGraph\.",
    },
    {
        "id": "fused_dv_reads_p_untransposed",
        "mechanism": "the backward's P^T is P viewed with P's own strides, so dV = P dO",
        "file": "kernels/sdpa_graph.cpp",
        "edits": [("{h * n * n, n * n, 1, n}, gb.io(), true));\n  gb.matmul(p_t, g.d_o, g.dv);",
                   "{h * n * n, n * n, n, 1}, gb.io(), true));\n  gb.matmul(p_t, g.d_o, g.dv);")],
        "targets": [UNIT],
        "tests": r"^Fused",
    },
    {
        "id": "fused_p_in_fp32",
        "mechanism": "the forward hands the second matmul P in fp32, a graph no fused engine takes (the CPU evaluation cannot tell)",
        "file": "kernels/sdpa_graph.cpp",
        "edits": [('gb.like("P", masked, gb.io())', 'gb.like("P", masked)')],
        "targets": ["moebench_cudnn_deviceless_tests"],
        "tests": r"^cudnn\.deviceless\.",
    },
    # The segmented expert route: counts on the device (moe/experts_segmented.cpp, kernels/segment_*)
    {
        "id": "segmented_gate_waits_for_counts",
        "mechanism": "the gate copies its counts to the host and waits for them although the segmented route reads none",
        "file": "moe/moe_layer.cpp",
        "edits": [("s, dispatcher_->reads_host_counts());", "s, true);")],
        "targets": [UNIT],
        "tests": r"^Segmented",
    },
    {
        "id": "segment_offsets_one_group",
        "mechanism": "the device layout counts each expert's first capacity group only, so later groups' rows overlap",
        "file": "kernels/segment_offsets_cpu.cpp",
        "edits": [("      next += a.kept[at];", "      if (g == 0) next += a.kept[at];")],
        "targets": [UNIT],
        "tests": r"^Segment",
    },
    {
        "id": "segment_weights_read_on_beta_zero",
        "mechanism": "the weights form's first accumulation reads what it overwrites (beta 0 run as beta 1)",
        "file": "kernels/segment_gemm_cpu.cpp",
        "edits": [("const_cast<char*>(elem(g.c, e * g.stride_c, g.dtype)), g.dtype, 1.f, g.beta);",
                   "const_cast<char*>(elem(g.c, e * g.stride_c, g.dtype)), g.dtype, 1.f, 1.f);")],
        "targets": [UNIT],
        "tests": r"^Segment",
    },
    {
        "id": "segmented_backward_always_accumulates",
        "mechanism": "the segmented experts' backward adds into stale weight gradients after zero_grad()",
        "file": "moe/experts.cpp",
        "edits": [("  if (c.device_offset) return backward_segmented(c, dy, dx, beta, s, keep_grad_h);",
                   "  if (c.device_offset) return backward_segmented(c, dy, dx, 1.f, s, keep_grad_h);")],
        "targets": [UNIT],
        "tests": r"^(Segmented|GptTrainerStep)",
    },
    # The GPT step's breakdown (runtime/range.h, harness/range_tree.h, pipeline/gpt_trainer.cpp)
    {
        "id": "breakdown_optimizer_untimed",
        "mechanism": "the step's optimizer runs inside an NVTX-only range, so the breakdown misses a phase",
        "file": "pipeline/gpt_trainer.cpp",
        "edits": [('ScopedRange r("step.optimizer", compute_, breakdown_);', 'ScopedRange r("step.optimizer", compute_);')],
        "targets": [UNIT],
        "tests": r"^GptTrainerStep",
    },
    {
        "id": "breakdown_paths_flat",
        "mechanism": "a range is recorded under its name alone, not under the ranges open around it",
        "file": "runtime/range.cpp",
        "edits": [('std::string path = open_.empty() ? std::string(name) : open_.back() + "/" + std::string(name);',
                   'std::string path(name);')],
        "targets": [UNIT],
        "tests": r"^(Breakdown|GptTrainerStep)",
    },
    {
        "id": "range_tree_other_is_the_parent",
        "mechanism": "a parent's (other) row keeps the whole parent, its children not taken off",
        "file": "harness/range_tree.cpp",
        "edits": [("      for (std::size_t r = 0; r < rest.size(); ++r) rest[r] -= ms[kid][r];", "")],
        "targets": [UNIT],
        "tests": r"^RangeTree",
    },
    {
        "id": "phase_flops_core_backward_once",
        "mechanism": "attention's core backward counted as one forward's FLOPs, not two",
        "file": "models/roofline.cpp",
        "edits": [('add("attention.core.bwd", 2 * core,', 'add("attention.core.bwd", core,')],
        "targets": [UNIT],
        "tests": r"^Roofline",
    },
    {
        "id": "kernel_log_loses_the_range",
        "mechanism": "a logged CPU op is not put under the range its enqueuer was in",
        "file": "runtime/cpu_queue.cpp",
        "edits": [("    task.path = current_range_path();", "    task.path.clear();")],
        "targets": [UNIT, "moebench_gpt_step", "moebench_profile"],
        "tests": r"^(KernelLog\.|bench\.gpt_step\.kernels$)",
    },
    {
        "id": "range_path_not_the_threads",
        "mechanism": "a timed range does not become its thread's current path, so ops land outside it",
        "file": "runtime/range.cpp",
        "edits": [("      timed_paths.push_back(path_);\n", "")],
        "targets": [UNIT],
        "tests": r"^KernelLog\.",
    },
    {
        "id": "kernel_log_keeps_events",
        "mechanism": "the kernel log counts a stream's events and waits as ops of the computation",
        "file": "runtime/kernel_log.cpp",
        "edits": [('  if (!std::strcmp(name, "event") || !std::strcmp(name, "wait event")) return;\n', "")],
        "targets": [UNIT],
        "tests": r"^KernelLog\.",
    },
    {
        "id": "inline_ops_not_logged",
        "mechanism": "the kernel log misses the ops the CPU's default stream runs at once: a layer on it logs nothing",
        "file": "kernels/exec.h",
        "edits": [("  if (const InlineOpLogger log = inline_op_logger.load(std::memory_order_acquire)) {",
                   "  if (const InlineOpLogger log = nullptr) {")],
        "targets": [UNIT, "moebench_moe_layer"],
        "tests": r"^(KernelLog\.|bench\.moe_layer\.kernels\.local$)",
    },
    {
        "id": "layer_kernel_log_without_ranges",
        "mechanism": "the layer's logged iterations time no ranges, so its ops land under none of the layer's",
        "file": "bench/moe_layer.cpp",
        "edits": [("moe_.resolved_tokens, f.y.data(), s, &b);", "moe_.resolved_tokens, f.y.data(), s, nullptr);"),
                  ("f.dx.data(), s, &b);\n    });", "f.dx.data(), s, nullptr);\n      (void)b;\n    });")],
        "targets": ["moebench_moe_layer"],
        "tests": r"^bench\.moe_layer\.kernels\.",
    },
    {
        "id": "targets_layer_without_kernels",
        "mechanism": "a missed layer target's evidence leaves out its kernel log's slowest kernels",
        "file": "scripts/gpu_targets.py",
        "edits": [('(f"kernels_{row.get(\'dispatcher\')}.csv" if layer else "step_kernels.csv")', '"step_kernels.csv"')],
        "targets": ["moebench_kernels"],  # nothing to build: the script is Python
        "tests": r"^script\.gpu_targets\.verdicts$",
    },
    {
        "id": "pool_poison_in_kernel_log",
        "mechanism": "the pool's poisoning of freed blocks (a test mode) is logged as ops of the computation, outside the layer's ranges",
        "file": "runtime/allocator.cpp",
        "edits": [("    const PoolPoisoning poisoning;  // no op of the computation: the kernel log leaves it out\n", "")],
        "targets": ["moebench_moe_layer"],
        "tests": r"^bench\.moe_layer\.kernels\.local$",
    },
    {
        "id": "phase_bytes_core_materialized",
        "mechanism": "attention's core forward is floored at the materialized S x S probabilities' traffic, not flash's",
        "file": "models/roofline.cpp",
        "edits": [("L * T * (4 * h * es + 4 * heads));           // q, k, v in; o",
                   "L * T * (4 * h * es + 4 * heads) + L * sequences * heads * S * S * es);  // q, k, v in; o")],
        "targets": [UNIT],
        "tests": r"^Roofline",
    },
    {
        "id": "breakdown_parent_floor_the_largest",
        "mechanism": "a parent phase's floor is its largest child's, not the sum of its children's run one after another",
        "file": "bench/gpt_step.cpp",
        "edits": [("            sum.floor_ms += c.floor_ms;", "            sum.floor_ms = std::max(sum.floor_ms, c.floor_ms);")],
        "targets": ["moebench_gpt_step", "moebench_profile"],
        "tests": r"^bench\.gpt_step\.breakdown$",
    },
    # The bf16 gate (kernels/bf16_split_cpu.cpp, moe/gate.cpp)
    {
        "id": "bf16_split_leading_part_only",
        "mechanism": "the bf16 parts of an fp32 value keep its leading part alone: the gate's GEMMs become bf16 GEMMs",
        "file": "kernels/bf16_split_cpu.cpp",
        "edits": [("      bits[1] = to_bits16(DType::bf16, rest);\n      bits[2] = to_bits16(DType::bf16, rest - from_bits16(DType::bf16, bits[1]));",
                   "      bits[1] = 0;\n      bits[2] = 0;")],
        "targets": [UNIT],
        "tests": r"^Bf16Split\.",
    },
    {
        "id": "bf16_gate_dx_without_weight_low_part",
        "mechanism": "the bf16 gate's input gradient leaves out the weight's second part: dx is a bf16 GEMM's",
        "file": "moe/gate.cpp",
        "edits": [("Bf16Parts{4, {0, 0, 0, 1}}", "Bf16Parts{4, {0, 0, 0, 0}}")],
        "targets": [UNIT],
        "tests": r"^Bf16Split\.TheBf16Gate",
    },
    {
        "id": "bf16_gate_widens_tokens",
        "mechanism": "the bf16 gate widens its tokens to fp32 and runs an fp32 GEMM again",
        "file": "moe/gate.cpp",
        "edits": [("  if (cfg_.dtype == DType::bf16) {\n    logits_from_bf16(", "  if (false) {\n    logits_from_bf16(")],
        "targets": [UNIT],
        "tests": r"^Bf16Split\.TheBf16Gate",
    },
    # Initialisation (moe/init.cpp)
    {
        "id": "init_slices_restart_the_stream",
        "mechanism": "a fill on threads starts every slice at the stream's first value: the weights repeat, slice after slice",
        "file": "moe/init.cpp",
        "edits": [("seed, id, std_dev, first + s * per);", "seed, id, std_dev, first);")],
        "targets": [UNIT],
        "tests": r"^DeterministicInit\.",
    },
    # The tree's rules (tests/cli/check_tree.py)
    {
        "id": "bench_declares_a_library",
        "mechanism": "bench/ declares a library again",
        "file": "bench/CMakeLists.txt",
        "edits": [("add_executable(moebench_comm comm.cpp)",
                   "add_library(moebench_comm_parts STATIC comm.cpp)\nadd_executable(moebench_comm comm.cpp)")],
        "targets": ["moebench_comm"],
        "tests": r"^tree\.rules$",
    },
]
