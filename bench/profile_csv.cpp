#include "bench/profile_csv.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace moebench {

std::string curve_key(collectives::Collective c, std::uint64_t size_bytes) {
  return "profile/collective/" + std::string(collectives::collective_name(c)) + "/" + std::to_string(size_bytes);
}

int write_profile_csv(const BenchContext& ctx, const ProfileRecord& rec, const std::vector<RunRecord>& runs) {
  std::map<std::string, Spread> spread;
  for (const auto& r : runs)
    if (!r.error) spread[r.name] = r.time_ms();
  const std::string elementwise_key = "profile/elementwise", copy_key = "profile/copy",
                    small_key = "profile/exchange/" + std::to_string(small_message(ctx)),
                    big_key = "profile/exchange/" + std::to_string(rec.big_message);
  bool any_gemm = false;
  for (const Shape& s : rec.shapes) any_gemm |= spread.count("profile/gemm/" + s.key()) > 0;
  if (!any_gemm || !spread.count(copy_key) || !spread.count(elementwise_key) ||
      (!rec.link && (!spread.count(small_key) || !spread.count(big_key)))) {
    std::fprintf(stderr, "moebench_profile: error: a measurement failed; no profile written\n");
    return 1;
  }
  const bool cpu = ctx.backend() == Backend::cpu;
  const bool half = ctx.dtype() != DType::f32;
  const int ranks = ctx.world.size();
  // The pairwise all-to-all's (p - 1) steps: t = (p - 1) (alpha + n / (p B)).
  const double steps = double(ranks - 1);
  // Every measured value from one time per measurement: the median (the profile's value), and
  // the fastest and slowest repetitions' (its spread; the link's bandwidth, a difference of two
  // times, takes the other end of the small exchange's so the range holds the median's value).
  struct Values {
    std::map<double, double> rate;  // FLOP/s per GEMM size (equal sizes from different shapes: their mean)
    double peak = 0, copy_bw = 0, latency = 0, elementwise_bw = 0, link_bw = 0;
  };
  auto values = [&](double Spread::*pick, double Spread::*other_end) {
    Values v;
    std::map<double, std::vector<double>> rates;
    for (const Shape& s : rec.shapes) {
      const auto it = spread.find("profile/gemm/" + s.key());
      if (it != spread.end()) rates[s.flops()].push_back(s.flops() / (it->second.*pick / repeats(s) * 1e-3));
    }
    for (const auto& [f, r] : rates) {
      double mean = 0;
      for (double x : r) mean += x;
      v.peak = std::max(v.peak, v.rate[f] = mean / double(r.size()));
    }
    const auto ms = [&](const std::string& key) { return spread.at(key).*pick; };
    v.copy_bw = 2.0 * double(rec.copy_bytes) / (ms(copy_key) / kCopies * 1e-3);  // read + write
    v.elementwise_bw = 2.0 * double(rec.copy_bytes / 4 * dtype_size(ctx.dtype())) / (ms(elementwise_key) * 1e-3);
    v.latency = rec.link ? rec.link->intra_latency : ms(small_key) / kExchangeRounds * 1e-3 / steps;
    // At the fast end the big exchange's fastest repetition may not outlast the small one's
    // slowest (a noisy machine, a tiny message): the bandwidth is then unbounded above.
    if (rec.link) {  // one rank ran no exchange
      v.link_bw = rec.link->intra_bw;
      return v;
    }
    const double big_less_small = ms(big_key) - spread.at(small_key).*other_end;
    v.link_bw = big_less_small > 0 ? steps * double(rec.big_message) / ranks / (big_less_small / kExchangeRounds * 1e-3)
                                   : std::numeric_limits<double>::infinity();
    return v;
  };
  const Values mid = values(&Spread::median, &Spread::median), fast = values(&Spread::min, &Spread::max),
               slow = values(&Spread::max, &Spread::min);
  if (!std::isfinite(mid.link_bw))
    throw Error("moebench_profile: the link's bandwidth is not measurable in this run: the " +
                std::to_string(rec.big_message >> 20) + " MiB exchange's median time did not exceed the small one's "
                "(a loaded machine?); run it again");
  const double peak = mid.peak;
  std::size_t free_bytes = 0, total_bytes = 0;
  ctx.device.memory(&free_bytes, &total_bytes);
  const double memory = cpu ? double(total_bytes) / ranks : double(total_bytes);
  const std::string here = "measured by moebench_profile on " + ctx.provenance.device + " (" + std::to_string(ranks) +
                           " ranks, " + ctx.provenance.link + ")";
  CsvTable t({"field", "at", "value", "unit", "low", "high", "source"});
  auto put = [&](const std::string& f, double v, const std::string& unit, const std::string& src) {
    t.add_row({f, "", fmt(v, 6), unit, "", "", src});
  };
  // A value from this run's measurements, with its range over the fastest and slowest repetitions.
  // An end may be unbounded (the link's fast end, above): "inf", which no reader takes for a value.
  auto put_measured = [&](const std::string& f, double Values::*field, double scale, const std::string& unit,
                          const std::string& src) {
    const double a = fast.*field * scale, b = slow.*field * scale;
    auto end = [](double v) { return std::isinf(v) ? std::string("inf") : fmt(v, 6); };
    t.add_row({f, "", fmt(mid.*field * scale, 6), unit, end(std::min(a, b)), end(std::max(a, b)), src});
  };
  t.add_row({"name", "", rec.name + ": " + ctx.provenance.device + ", " + std::to_string(ranks) + " ranks (" +
                              backend_name(ctx.backend()) + " backend)",
             "", "", "", here});
  const std::string from_link = rec.link ? "not measured (one rank): from profile " + rec.link->path : "";
  put("gpus_per_node", rec.link ? rec.link->gpus_per_node : ranks, "count",
      rec.link ? from_link : "the ranks of this run, one node");
  const std::string peak_src = here + ": the sweep's best GEMM rate per rank, every rank computing";
  put_measured(half ? "peak_fp16" : "peak_fp32", &Values::peak, 1e-12, "TFLOP/s", peak_src);
  put(half ? "peak_fp32" : "peak_fp16", peak / 1e12, "TFLOP/s",
      cpu ? "the CPU backend computes fp32 only: the fp32 peak" : "not measured in this run: the measured dtype's peak");
  put("memory", memory / 1e9, "GB", cpu ? "this machine's memory / ranks" : "the device's memory");
  put_measured("memory_bw", &Values::copy_bw, 1e-9, "GB/s",
               here + ": a copy of " + std::to_string(rec.copy_bytes >> 20) + " MiB on every rank, read + write");
  put_measured("elementwise_bw", &Values::elementwise_bw, 1e-9, "GB/s",
               here + ": GeLU forward over " + std::to_string(rec.copy_bytes >> 20) + " MiB on every rank, read + write");
  if (rec.link) {
    put("intra_bw", rec.link->intra_bw / 1e9, "GB/s", from_link);
    put("intra_latency", rec.link->intra_latency * 1e6, "us", from_link);
    put("inter_bw", rec.link->inter_bw / 1e9, "GB/s", from_link);
    put("inter_latency", rec.link->inter_latency * 1e6, "us", from_link);
  } else {
    put_measured("intra_bw", &Values::link_bw, 1e-9, "GB/s",
                 here + ": an all-to-all of " + std::to_string(rec.big_message >> 20) +
                     " MiB per rank, less the small one's time, as (p - 1) n / (p B)");
    put_measured("intra_latency", &Values::latency, 1e6, "us", here + ": an all-to-all of 8 bytes per peer, over its p - 1 steps");
    put_measured("inter_bw", &Values::link_bw, 1e-9, "GB/s", "one node: no link between nodes was measured; the intra-node value");
    put_measured("inter_latency", &Values::latency, 1e6, "us", "one node: no link between nodes was measured; the intra-node value");
  }
  put_measured("pcie_bw", &Values::copy_bw, 0.5e-9, "GB/s",
               cpu ? "host and device are the same memory: the copy's rate" : here + ": the device copy's rate (no host transfer measured)");
  for (const auto& [f, r] : mid.rate) {
    const double a = fast.rate.at(f) / peak, b = slow.rate.at(f) / peak;
    t.add_row({"gemm_efficiency", fmt(f / 1e9, 6), fmt(r / peak, 4), "fraction", fmt(std::min(a, b), 4),
               fmt(std::max(a, b), 4),
               here + ": [m, k] x [k, n] " + std::string(dtype_name(ctx.dtype())) + " GEMMs, rate over the best (median)"});
  }
  for (collectives::Collective c : collectives::all_collectives())
    for (std::uint64_t bytes : rec.curve_sizes) {
      const collectives::Geometry g = collectives::geometry(c, bytes, ranks, ctx.dtype());
      const auto it = spread.find(curve_key(c, g.size_bytes));
      if (g.block == 0 || it == spread.end()) continue;
      t.add_row({std::string(collectives::collective_name(c)) + "_time", std::to_string(g.size_bytes),
                 fmt(it->second.median * 1e3, 6), "us", fmt(it->second.min * 1e3, 6), fmt(it->second.max * 1e3, 6),
                 here + ": one call per iteration, the slowest rank's time, as the comm bench times it"});
    }
  const std::string path = ctx.opts.out_dir + "/models/profile_" + rec.name + ".csv";
  t.write(path, ctx.provenance);
  std::printf("profile: peak %.3g GFLOP/s per rank, memory %.3g GB/s, link %.3g GB/s and %.3g us; wrote %s\n",
              peak / 1e9, mid.copy_bw / 1e9, mid.link_bw / 1e9, mid.latency * 1e6, path.c_str());
  return 0;
}

}  // namespace moebench
