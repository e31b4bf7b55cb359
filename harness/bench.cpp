#include "harness/bench.h"
#include <cstring>
#include <iostream>
#include "harness/provenance.h"

namespace moebench {

std::optional<std::string> BenchContext::check_fits(std::uint64_t bytes, const std::string& option) const {
  std::size_t free_b = 0, total_b = 0;
  device.memory(&free_b, &total_b);
  // Ranks sharing a host share its memory.
  const double share = backend() == Backend::cpu ? double(free_b) / rt.local_size() : double(free_b);
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

namespace {

// Keeps every run for the program's CSV and forwards to the console on rank 0.
class RecordingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit RecordingReporter(benchmark::BenchmarkReporter* forward) : forward_(forward) {}
  bool ReportContext(const Context& c) override { return forward_ ? forward_->ReportContext(c) : true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      RunRecord rec;
      rec.name = r.benchmark_name();
      rec.iterations = r.iterations;
      rec.seconds_per_iter = r.iterations ? r.real_accumulated_time / double(r.iterations) : 0.0;
      for (const auto& [k, v] : r.counters) rec.counters[k] = v.value;
      rec.error = r.error_occurred;
      rec.error_message = r.error_message;
      records.push_back(std::move(rec));
    }
    if (forward_) forward_->ReportRuns(runs);
  }
  void Finalize() override {
    if (forward_) forward_->Finalize();
  }
  std::vector<RunRecord> records;

 private:
  benchmark::BenchmarkReporter* forward_;
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

}  // namespace

int bench_main(int argc, char** argv, BenchProgram& program) {
  Runtime rt(argc, argv, program.name());
  try {
    CommonOptions opts;
    CLI::App app(program.description() +
                 "\nGoogle Benchmark flags (--benchmark_filter, --benchmark_out=FILE --benchmark_out_format=json, ...) are accepted too.",
                 program.name());
    add_common_options(app, opts);
    program.add_options(app);
    // Our help, not Google Benchmark's (which would claim --help first).
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
        if (rt.rank() == 0) std::cout << app.help();
        return 0;
      }
    std::vector<char*> args = args_for_rank(rt.rank(), argc, argv);
    int gb_argc = static_cast<int>(args.size()) - 1;
    benchmark::Initialize(&gb_argc, args.data());

    std::optional<std::string> usage_error;
    try {
      std::vector<std::string> rest;
      for (int i = gb_argc - 1; i >= 1; --i) rest.emplace_back(args[i]);
      app.parse(rest);
    } catch (const CLI::ParseError& e) {
      usage_error = e.what();
    }
    rt.agree_or_exit(usage_error);

    std::optional<Device> device;
    std::optional<std::string> device_error;
    try {
      device.emplace(Device::open(opts.backend_kind(), rt.local_rank()));
      device->set_tensor_cores(!opts.no_tensor_cores);
      if (opts.backend_kind() == Backend::cpu && opts.dtype != "fp32")
        device_error = "--dtype " + opts.dtype + ": the cpu backend computes in fp32 only; use --dtype fp32 or --backend cuda";
    } catch (const Error& e) {
      device_error = e.what();
    }
    rt.agree_or_exit(device_error);

    TrackingAllocator alloc(opts.backend_kind());
    std::unique_ptr<Communicator> world = make_world_communicator(rt, opts.backend_kind(), opts.comm_timeout_s);
    BenchContext ctx{rt, opts, *device, alloc, *world,
                     make_provenance(*device, rt.world(), opts.dtype, opts.scale)};
    rt.agree_or_exit(program.validate(ctx));

    program.register_benchmarks(ctx);
    std::unique_ptr<benchmark::BenchmarkReporter> console;
    if (rt.rank() == 0) console = std::make_unique<benchmark::ConsoleReporter>();
    RecordingReporter reporter(console.get());
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    int rc = program.finish(ctx, reporter.records);
    rc = rt.any(rc != 0) ? (rc != 0 ? rc : 1) : 0;
    world.reset();
    return rc;
  } catch (const std::exception& e) {
    rt.abort_job(e.what());
  }
}

}  // namespace moebench
