#include "harness/bench.h"
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include "harness/output_check.h"
#include "harness/provenance.h"
#include "kernels/gemm.h"
#include "comm/nccl_order.h"
#include "runtime/timeline.h"
#include "runtime/watchdog.h"

namespace moebench {

int BenchContext::repetitions() const {
  return opts.repetitions.value_or(default_repetitions);
}

void BenchContext::add(const std::string& name, int iterations, std::function<void(benchmark::State&)> fn,
                       benchmark::TimeUnit unit, std::optional<int> reps) {
  cases.push_back({name, iterations, reps.value_or(repetitions()), std::move(fn), unit});
  registered.push_back(name);
  // Each round registers the case once, with one repetition.
  run_names.push_back(name + "/iterations:" + std::to_string(iterations) + "/repeats:1/manual_time");
}

void BenchContext::register_rounds() {
  int rounds = 0;
  for (const Case& c : cases) rounds = std::max(rounds, c.repetitions);
  for (int round = 1; round <= rounds; ++round)
    for (const Case& c : cases) {
      if (round > c.repetitions) continue;
      benchmark::RegisterBenchmark(c.name.c_str(), [fn = c.fn, name = c.name, round, reps = c.repetitions,
                                                    p = progress](benchmark::State& st) {
        if (p) p->repetition_started(name, round, reps);
        fn(st);
        if (p) p->repetition_done(name, round, reps);
      })
          ->UseManualTime()
          ->Iterations(c.iterations)
          ->Repetitions(1)
          ->Unit(c.unit);
    }
  cases.clear();
}

std::optional<std::string> BenchContext::check_fits(std::uint64_t bytes, const std::string& option) const {
  std::size_t free_b = 0, total_b = 0;
  device.memory(&free_b, &total_b);
  // Ranks sharing a host share its memory.
  const double share = backend() == Backend::cpu ? double(free_b) / rt.local_size() : double(free_b);
  largest_need = std::max(largest_need, bytes);
  if (double(bytes) > 0.9 * share)
    return option + ": needs " + format_bytes(double(bytes)) + " per rank but only " + format_bytes(share) +
           " is free for each rank on this " + (backend() == Backend::cpu ? "host" : "GPU") + "; use a smaller value";
  return std::nullopt;
}

void BenchContext::set_iteration_time(benchmark::State& st, double local_ms) const {
  st.SetIterationTime(rt.max(local_ms) / 1e3);
}

bool BenchContext::skip_if_any(benchmark::State& st, const std::optional<std::string>& reason) const {
  if (!rt.any(reason.has_value())) return false;
  st.SkipWithError(reason ? reason->c_str() : "skipped on another rank");
  return true;
}

void BenchContext::profile_begin() const {
  if (opts.profile) profiler_start(backend());
}
void BenchContext::profile_end() const {
  if (opts.profile) profiler_stop(backend());
}

std::vector<double> RunRecord::ms() const {
  std::vector<double> out;
  for (double s : seconds) out.push_back(s * 1e3);
  return out;
}

Spread RunRecord::time_ms() const { return spread_of(ms()); }

Spread RunRecord::counter(const std::string& key) const {
  const auto it = counters.find(key);
  if (it == counters.end()) throw Error(name + ": no counter '" + key + "'");
  return spread_of(it->second);
}

std::string describe_ms(const Spread& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.4g ms (median of %d; %.4g-%.4g)", s.median, s.samples, s.min, s.max);
  return buf;
}

namespace {

// Gathers every repetition of a benchmark into one record; on rank 0 prints one line per
// benchmark and our own context (Google Benchmark's console reporter is not used: its times
// are not ours, and its context line warns about its own library build, which our manual
// times do not depend on).
// Each line starts with how far the run is (harness/progress.h).
class RecordingReporter : public benchmark::BenchmarkReporter {
 public:
  // `repetitions`: each case's, by name (its rounds are reported one by one).
  RecordingReporter(bool print, std::string header, RunProgress& progress, std::function<void()> on_start,
                    std::map<std::string, int> repetitions)
      : print_(print), header_(std::move(header)), progress_(progress), on_start_(std::move(on_start)),
        repetitions_(std::move(repetitions)) {
    SetErrorStream(&gb_errors);
  }
  bool ReportContext(const Context&) override {
    if (print_) std::printf("%s", header_.c_str());
    on_start_();
    return true;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;  // Google Benchmark's aggregates: we compute our own
      const std::string name = r.run_name.function_name;
      auto at = index_.find(name);
      if (at == index_.end()) {  // its first round: records keep the order of registration
        at = index_.emplace(name, records.size()).first;
        records.emplace_back();
        records.back().name = name;
        records.back().iterations = r.iterations;
      }
      RunRecord& rec = records[at->second];
      ++rounds_[name];
      if (r.error_occurred) {
        rec.error = true;
        rec.error_message = r.error_message;
      } else {
        rec.seconds.push_back(r.iterations ? r.real_accumulated_time / double(r.iterations) : 0.0);
        for (const auto& [k, v] : r.counters) rec.counters[k].push_back(v.value);
      }
      const auto expected = repetitions_.find(name);
      if (expected == repetitions_.end() || rounds_[name] == expected->second) print(rec);
    }
  }
  std::vector<RunRecord> records;
  std::ostringstream gb_errors;

 private:
  void print(const RunRecord& r) {
    const std::string done = progress_.case_done();
    if (!print_) return;
    if (r.error) {
      std::printf("%-24s %-48s skipped: %s\n", done.c_str(), r.name.c_str(), r.error_message.c_str());
    } else if (!r.seconds.empty()) {
      const Spread s = r.time_ms();
      std::printf("%-24s %-48s %12.4g ms  [%.4g .. %.4g]  %d x %lld iterations\n", done.c_str(), r.name.c_str(),
                  s.median, s.min, s.max, s.samples, static_cast<long long>(r.iterations));
    }
    std::fflush(stdout);
  }
  bool print_;
  std::string header_;
  RunProgress& progress_;
  std::function<void()> on_start_;
  std::map<std::string, int> repetitions_;
  std::map<std::string, std::size_t> index_;  // records' index by name
  std::map<std::string, int> rounds_;         // rounds reported, by name
};

// Only rank 0 writes --benchmark_out: other ranks drop those flags before Google Benchmark sees them.
std::vector<char*> args_for_rank(int rank, int argc, char** argv) {
  std::vector<char*> out;
  for (int i = 0; i < argc; ++i) {
    if (rank != 0 && std::strncmp(argv[i], "--benchmark_out", 15) == 0) continue;
    out.push_back(argv[i]);
  }
  out.push_back(nullptr);
  return out;
}

// The value of --flag=VALUE among argv, if given.
std::optional<std::string> flag_value(int argc, char** argv, const std::string& flag) {
  const std::string prefix = flag + "=";
  std::optional<std::string> v;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) v = std::string(argv[i] + prefix.size());
  return v;
}

// Google Benchmark's own flags with values it would answer by printing its usage and exiting
// with status 0 (and on one rank only): checked before it sees them.
std::optional<std::string> check_benchmark_flags(int argc, char** argv) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> choices = {
      {"--benchmark_out_format", {"json", "console", "csv"}},
      {"--benchmark_format", {"console", "json", "csv"}},
      {"--benchmark_time_unit", {"ns", "us", "ms", "s"}},
      {"--benchmark_color", {"auto", "true", "false", "yes", "no", "1", "0"}}};
  for (const auto& [flag, allowed] : choices)
    if (const auto v = flag_value(argc, argv, flag))
      if (std::find(allowed.begin(), allowed.end(), *v) == allowed.end())
        return flag + ": '" + *v + "' is not allowed; allowed: " + describe_choice(allowed);
  if (const auto out = flag_value(argc, argv, "--benchmark_out"); out && out->empty())
    return "--benchmark_out: is an empty path; allowed: a file path";
  return std::nullopt;
}

// Options that only mean something on the GPU.
std::optional<std::string> check_common(const CommonOptions& o) {
  if (o.backend_kind() == Backend::cpu) {
    if (o.dtype != "fp32")
      return "--dtype: '" + o.dtype +
             "' is only emulated by the cpu backend (widened to fp32 element by element: its times say nothing of "
             "16-bit hardware), so it measures fp32; allowed there: fp32 (or use --backend cuda)";
    if (o.profile) return "--profile: brackets the CUDA profiler; it means nothing with --backend cpu";
    if (o.no_tensor_cores) return "--no-tensor-cores: only the cuda backend has tensor cores; drop it with --backend cpu";
  } else if (o.blas_threads) {
    return "--blas-threads: sets the CPU GEMM's threads; it means nothing with --backend cuda";
  } else if (o.link_bandwidth_GBps) {
    return "--link-bandwidth: an emulated link is a cpu-backend setting; the GPU's links are measured as they are";
  }
  if (o.link_latency_us && !o.link_bandwidth_GBps)
    return "--link-latency: emulates a link only together with --link-bandwidth";
  return std::nullopt;
}

// --warmup and --iters where the bench sets its own iterations: refused, never ignored.
// The environment's switches of the communicators, refused as options are (exit 2, before any work).
std::optional<std::string> refused_environment() {
  try {
    (void)nccl_order_settings();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  // NCCL settings that tie communicators together again: the pipeline's forward and backward
  // communicators are apart so that NCCL's order on one cannot wait behind the other's kernels.
  for (const auto& [name, why] :
       {std::pair{"NCCL_COMM_SPLIT_SHARE_RESOURCES", "a split communicator then shares its parent's order and resources, "
                                                     "so the pipeline's backward communicator waits behind its forward one"},
        std::pair{"NCCL_LAUNCH_ORDER_IMPLICIT", "NCCL then serialises every communicator of a device where it falls back to "
                                                "its serial mode (CUDA below 12.3, or a capture on drivers below 12.9), "
                                                "which brings back the deadlock the pipeline's paired sends avoid"}})
    if (const char* v = std::getenv(name); v && *v && std::string(v) != "0")
      return std::string(name) + ": '" + v + "' is not allowed: " + why + "; unset it or set 0";
  const char* own = std::getenv("MOEBENCH_NCCL_HOSTID_PER_RANK");
  if (own && *own && std::string(own) != "0" && std::string(own) != "1")
    return "MOEBENCH_NCCL_HOSTID_PER_RANK: '" + std::string(own) + "' is not allowed; use 0 or 1 (a host of its own per rank)";
  return std::nullopt;
}

std::optional<std::string> refused_iteration_counts(const BenchProgram& program, const CommonOptions& o) {
  if (program.takes_iteration_counts()) return std::nullopt;
  for (const auto& [flag, given] : {std::pair{"--warmup", o.warmup.has_value()}, std::pair{"--iters", o.iters.has_value()}})
    if (given)
      return std::string(flag) + ": " + program.name() +
             " sets its own iterations (each one a whole run it prepares, such as a training step) and does not "
             "take it; --repetitions sets how many times each measurement is repeated";
  return std::nullopt;
}

// Every folder the program writes, on the rank that writes it; stale temporaries removed.
std::optional<std::string> check_outputs(const BenchContext& ctx, const BenchProgram& program, int argc, char** argv) {
  const bool writer = ctx.rt.rank() == 0;
  if (writer)
    if (const auto out = flag_value(argc, argv, "--benchmark_out"))
      if (auto e = check_output_file("--benchmark_out", *out)) return e;
  std::vector<OutputFolder> folders = program.output_folders(ctx);
  if (!ctx.opts.trace_dir.empty()) folders.push_back({"--trace", ctx.opts.trace_dir, true});
  for (const OutputFolder& f : folders) {
    if (!f.every_rank && !writer) continue;
    if (auto e = check_output_folder(f.option, f.path)) return e;
    remove_stale_temporaries(f.path);
  }
  return std::nullopt;
}

std::string context_header(const BenchContext& ctx, const std::string& program) {
  std::ostringstream h;
  h << "# " << program << ": " << backend_name(ctx.backend()) << " backend (" << ctx.device.info().name << "), "
    << ctx.world.size() << " rank(s) (" << ctx.world.link() << "), " << ctx.opts.dtype << ", " << ctx.opts.scale
    << " scale, "
    << ctx.repetitions() << " repetitions per measurement, commit " << ctx.provenance.commit;
  if (ctx.backend() == Backend::cpu) h << ", " << cpu_blas_threads() << " BLAS thread(s) per GEMM";
  h << "\n"
    << "# times: the slowest rank's, per iteration, from our own timers (steady clock on the cpu, CUDA events on a GPU);\n"
    << "# lines give the median over repetitions and [min .. max]; the cases' repetitions run interleaved, round by\n"
    << "# round, so repetition r of one case pairs with repetition r of another. Google Benchmark only schedules the runs, so the\n"
    << "# build type of its library (Debian's is a debug build) does not enter these times.\n";
  return h.str();
}

}  // namespace

// --check-options: how many ranks the launch to come will have (MOEBENCH_CHECK_RANKS, default 1).
static std::optional<std::string> ranks_to_check(int* ranks) {
  const char* text = std::getenv("MOEBENCH_CHECK_RANKS");
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (*end || n < 1 || n > (1 << 20))
    return "MOEBENCH_CHECK_RANKS: '" + std::string(text) + "' is not a number of ranks; allowed: a whole number from 1";
  *ranks = int(n);
  return std::nullopt;
}

int bench_main(int argc, char** argv, const std::function<std::unique_ptr<BenchProgram>()>& make_program) {
  std::unique_ptr<BenchProgram> program = make_program();
  Runtime rt(argc, argv, program->name());
  // Outside the try block, so that a failing rank prints its error and ends the job (abort_job)
  // before they are destroyed: their destructors wait for the device and for the peers (cudaFree
  // synchronises the device, where NCCL's kernels may still wait for a peer; a communicator's
  // destroy waits for its peers), and would keep the error unsaid until the peers' timeouts.
  std::optional<Device> device;
  std::optional<TrackingAllocator> alloc;
  std::unique_ptr<Communicator> world;
  try {
    CommonOptions opts;
    CLI::App app(program->description() +
                     "\nGoogle Benchmark flags (--benchmark_filter=REGEX, --benchmark_out=FILE "
                     "--benchmark_out_format=json, ...) are accepted too.",
                 program->name());
    add_common_options(app, opts);
    program->add_options(app);
    // --check-options: every check of the options, the program's own included, in one process and
    // against the MOEBENCH_CHECK_RANKS ranks a launch would have (default 1), and nothing else:
    // what an experiment script asks before it launches, or before the work it does first.
    bool check_only = false;
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "--check-options") == 0) {
        check_only = true;
        for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
        --argc;
        break;
      }
    // Our help, not Google Benchmark's (which would claim --help first).
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
        if (rt.rank() == 0) std::cout << app.help();
        return 0;
      }
      if (std::strcmp(argv[i], "--list-devices") == 0) {  // what the experiment scripts ask before launching
        std::string why;
        const int n = Device::cuda_device_count(&why);
        if (rt.rank() == 0) std::cout << n << " CUDA device(s)" << (n == 0 ? " (" + why + ")" : "") << std::endl;
        return 0;
      }
    }
    rt.agree_or_exit(check_benchmark_flags(argc, argv));
    std::vector<char*> args = args_for_rank(rt.rank(), argc, argv);
    int gb_argc = static_cast<int>(args.size()) - 1;
    benchmark::Initialize(&gb_argc, args.data());

    std::optional<std::string> usage_error;
    try {
      std::vector<std::string> rest;
      for (int i = gb_argc - 1; i >= 1; --i) rest.emplace_back(args[i]);
      app.parse(rest);
    } catch (const CLI::ParseError& e) {
      usage_error = usage_message(e, app);
    }
    if (!usage_error) usage_error = check_common(opts);
    if (!usage_error) usage_error = refused_iteration_counts(*program, opts);
    if (!usage_error) usage_error = refused_environment();
    int checked_ranks = 1;
    if (!usage_error && check_only) usage_error = ranks_to_check(&checked_ranks);
    rt.agree_or_exit(usage_error);
    Watchdog::set_timeout(opts.comm_timeout());
    if (opts.blas_threads) set_cpu_blas_threads(*opts.blas_threads);

    std::optional<std::string> device_error;
    try {
      device.emplace(Device::open(opts.backend_kind(), rt.local_rank()));
      device->set_tensor_cores(!opts.no_tensor_cores);
    } catch (const Error& e) {
      device_error = e.what();
    }
    rt.agree_or_exit(device_error);

    alloc.emplace(opts.backend_kind(), device->default_stream());
    std::optional<EmulatedLink> link;
    if (opts.link_bandwidth_GBps) link = EmulatedLink{*opts.link_bandwidth_GBps, opts.link_latency_us.value_or(0.0)};
    world = check_only ? make_unlaunched_world(checked_ranks)
                       : make_world_communicator(rt, opts.backend_kind(), link);
    BenchContext ctx{rt, opts, *device, *alloc, *world,
                     make_provenance(rt, *device, world->link(), opts.dtype, opts.scale), {}, {},
                     std::make_shared<RunProgress>(rt.rank() == 0)};
    ctx.default_repetitions = program->repetitions_at(ctx.scale());
    rt.agree_or_exit(program->validate(ctx));
    if (check_only) return 0;
    rt.agree_or_exit(check_outputs(ctx, *program, argc, argv));

    if (!opts.trace_dir.empty()) Timeline::enable(rt.rank());
    program->register_benchmarks(ctx);
    std::map<std::string, int> repetitions;
    for (const BenchContext::Case& c : ctx.cases) repetitions[c.name] = c.repetitions;
    ctx.register_rounds();
    RecordingReporter reporter(
        rt.rank() == 0, context_header(ctx, program->name()), *ctx.progress,
        [&ctx] {
          std::size_t free_b = 0, total_b = 0;
          ctx.device.memory(&free_b, &total_b);
          ctx.progress->start(selected_count(ctx.run_names, benchmark::GetBenchmarkFilter()), ctx.repetitions(),
                              ctx.largest_need,
                              ctx.backend() == Backend::cpu ? double(free_b) / ctx.rt.local_size() : double(free_b));
        },
        repetitions);
    const std::size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
    // A run that registered nothing to measure (MPMoE's f17 alone on one node) only writes.
    const bool nothing_to_measure = ctx.registered.empty();
    if (ran == 0 && !nothing_to_measure) {
      const std::string filter = benchmark::GetBenchmarkFilter();
      const bool bad_regex = reporter.gb_errors.str().find("Could not compile") != std::string::npos;
      std::string names;
      for (std::size_t i = 0; i < ctx.registered.size() && i < 3; ++i) names += (i ? ", " : "") + ctx.registered[i];
      rt.agree_or_exit("--benchmark_filter: '" + filter + "' " +
                       (bad_regex ? "is not a valid regular expression (POSIX extended)"
                                  : "selects none of the " + std::to_string(ctx.registered.size()) +
                                        " benchmarks of this run (e.g. " + names + ")") +
                       "; --benchmark_list_tests=true lists them");
    }
    benchmark::Shutdown();

    int rc = 0;
    // --benchmark_list_tests=true lists and measures nothing: then there is nothing to write.
    if (nothing_to_measure || rt.any(!reporter.records.empty())) rc = program->finish(ctx, reporter.records);
    rc = rt.any(rc != 0) ? (rc != 0 ? rc : 1) : 0;
    if (!opts.trace_dir.empty()) {
      ctx.device.synchronize();
      Timeline::write(opts.trace_dir + "/" + program->name() + ".rank" + std::to_string(rt.rank()) + ".json");
    }
    program.reset();  // before the communicators, allocator and device its members came from
    world.reset();
    return rc;
  } catch (const std::exception& e) {
    rt.abort_job(e.what());
  }
}

}  // namespace moebench
