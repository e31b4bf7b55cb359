#include "models/hardware_profile.h"
#include <libfccp/csv.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include "comm/collective_table.h"
#include "kernels/exec.h"

namespace moebench {
namespace {

double number(const std::string& where, const std::string& field, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v))
    throw Error(where + ": field '" + field + "': '" + text + "' is not a number");
  if (!(v > 0)) throw Error(where + ": field '" + field + "': must be > 0, got " + text);
  return v;
}

}  // namespace

const std::vector<ProfileScalar>& profile_scalars() {
  static const std::vector<ProfileScalar> scalars = {
      {"peak_fp16", "TFLOP/s", 1e12, &HardwareProfile::peak_fp16_flops},
      {"peak_fp32", "TFLOP/s", 1e12, &HardwareProfile::peak_fp32_flops},
      {"memory", "GB", 1e9, &HardwareProfile::memory_bytes},
      {"memory_bw", "GB/s", 1e9, &HardwareProfile::memory_bw},
      {"elementwise_bw", "GB/s", 1e9, &HardwareProfile::elementwise_bw},
      {"intra_bw", "GB/s", 1e9, &HardwareProfile::intra_bw},
      {"intra_latency", "us", 1e-6, &HardwareProfile::intra_latency},
      {"inter_bw", "GB/s", 1e9, &HardwareProfile::inter_bw},
      {"inter_latency", "us", 1e-6, &HardwareProfile::inter_latency},
      {"pcie_bw", "GB/s", 1e9, &HardwareProfile::pcie_bw},
  };
  return scalars;
}

double HardwareProfile::gemm_efficiency_at(double flops) const {
  const auto& c = gemm_efficiency;
  // Below the smallest measured GEMM: its time, fixed (a launch-latency regime), not its rate.
  if (flops <= c.front().first) return c.front().second * flops / c.front().first;
  if (flops >= c.back().first) return c.back().second;
  for (std::size_t i = 1; i < c.size(); ++i)
    if (flops <= c[i].first) {
      const double t = (std::log(flops) - std::log(c[i - 1].first)) / (std::log(c[i].first) - std::log(c[i - 1].first));
      return c[i - 1].second + t * (c[i].second - c[i - 1].second);
    }
  return c.back().second;
}

double HardwareProfile::gemm_seconds(double flops, bool half) const {
  if (flops <= 0) return 0;
  return flops / (peak_flops(half) * gemm_efficiency_at(flops));
}

HardwareProfile load_hardware_profile(const std::string& path) {
  const std::string where = "profile " + path;
  if (!std::ifstream(path)) throw Error(where + ": cannot be read (no such file, or no permission)");
  HardwareProfile p;
  p.path = path;
  std::map<std::string, int> seen;
  try {
    io::CSVReader<5, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(path);
    in.read_header(io::ignore_no_column | io::ignore_extra_column, "field", "at", "value", "unit", "source");
    for (const char* c : {"field", "at", "value", "unit", "source"})
      if (!in.has_column(c)) throw Error(where + ": no column '" + c + "'; columns: field,at,value,unit,source");
    std::string field, at, value, unit, source;
    while (in.read_row(field, at, value, unit, source)) {
      ++seen[field];
      if (field == "gemm_efficiency") {
        if (unit != "fraction") throw Error(where + ": field 'gemm_efficiency': unit '" + unit + "'; allowed: fraction");
        const double flops = number(where, "gemm_efficiency at (GFLOP)", at) * 1e9;
        const double eff = number(where, "gemm_efficiency", value);
        if (eff > 1) throw Error(where + ": field 'gemm_efficiency': must be at most 1, got " + value);
        p.gemm_efficiency.emplace_back(flops, eff);
        p.sources[field] = source;
        continue;
      }
      if (field == "overlap_slowdown") {
        if (unit != "fraction") throw Error(where + ": field 'overlap_slowdown': unit '" + unit + "'; allowed: fraction");
        const std::size_t bar = at.find('|');
        const std::string y = at.substr(0, bar), x = bar == std::string::npos ? "" : at.substr(bar + 1);
        const auto is = [](const std::string& s, std::initializer_list<const char*> names) {
          for (const char* n : names)
            if (s == n) return true;
          return false;
        };
        if (!is(y, {"comm", "comp", "mem"}) || !is(x, {"comm", "comp", "mem", "all"}) || x == y)
          throw Error(where + ": field 'overlap_slowdown': at '" + at +
                      "'; allowed: y|x, y one of comm, comp, mem and x another of them or all");
        if (!p.overlap_slowdown.emplace(std::pair{y, x}, number(where, "overlap_slowdown", value)).second)
          throw Error(where + ": field 'overlap_slowdown': two rows at " + at);
        p.sources[field] = source;
        continue;
      }
      if (const std::string kind = field.substr(0, field.rfind("_time"));
          field.ends_with("_time") &&
          std::find(profiled_collectives().begin(), profiled_collectives().end(), kind) != profiled_collectives().end()) {
        if (unit != "us") throw Error(where + ": field '" + field + "': unit '" + unit + "'; allowed: us");
        const double bytes = number(where, field + " at (bytes)", at);
        p.collective_seconds[kind].emplace_back(bytes, number(where, field, value) * 1e-6);
        p.sources[field] = source;
        continue;
      }
      if (seen[field] > 1) throw Error(where + ": field '" + field + "' is given twice");
      p.sources[field] = source;
      if (field == "name") {
        if (value.empty()) throw Error(where + ": field 'name' is empty");
        p.name = value;
        continue;
      }
      if (field == "gpus_per_node") {
        const double n = number(where, field, value);
        if (n != std::floor(n)) throw Error(where + ": field 'gpus_per_node': must be a whole number, got " + value);
        p.gpus_per_node = int(n);
        continue;
      }
      const ProfileScalar* s = nullptr;
      for (const ProfileScalar& k : profile_scalars())
        if (field == k.field) s = &k;
      if (!s) throw Error(where + ": unknown field '" + field + "'");
      if (unit != s->unit) throw Error(where + ": field '" + field + "': unit '" + unit + "'; allowed: " + s->unit);
      p.*(s->member) = number(where, field, value) * s->scale;
    }
  } catch (const io::error::base& e) {
    throw Error(where + ": " + e.what());
  }
  for (const char* f : {"name", "gpus_per_node", "gemm_efficiency"})
    if (!seen.count(f)) throw Error(where + ": field '" + std::string(f) + "' is missing");
  for (const ProfileScalar& k : profile_scalars())
    if (!seen.count(k.field)) throw Error(where + ": field '" + std::string(k.field) + "' is missing");
  std::sort(p.gemm_efficiency.begin(), p.gemm_efficiency.end());
  for (std::size_t i = 1; i < p.gemm_efficiency.size(); ++i)
    if (p.gemm_efficiency[i].first == p.gemm_efficiency[i - 1].first)
      throw Error(where + ": field 'gemm_efficiency': two rows at the same size");
  for (auto& [kind, curve] : p.collective_seconds) {
    std::sort(curve.begin(), curve.end());
    if (curve.size() < 2)
      throw Error(where + ": field '" + kind + "_time': needs two sizes or more (a line between them), got one");
    for (std::size_t i = 1; i < curve.size(); ++i)
      if (curve[i].first == curve[i - 1].first) throw Error(where + ": field '" + kind + "_time': two rows at the same size");
  }
  return p;
}

const std::vector<std::string>& profiled_collectives() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (collectives::Collective c : collectives::all_collectives()) out.push_back(collectives::collective_name(c));
    return out;
  }();
  return names;
}

static std::string profiles_dir() { return std::string(MOEBENCH_SOURCE_DIR) + "/models/profiles"; }

std::string resolve_profile(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".csv")) return name_or_path;
  return profiles_dir() + "/" + name_or_path + ".csv";
}

HardwareProfile load_profile_option(const std::string& option, const std::string& name_or_path) {
  const std::string path = resolve_profile(name_or_path);
  if (path != name_or_path && !std::filesystem::exists(path)) {
    std::string names;
    for (const auto& n : shipped_profiles()) names += (names.empty() ? "" : ", ") + n;
    throw Error(option + ": no profile '" + name_or_path + "'; there are: " + names + " (or give a profile CSV's path)");
  }
  return load_hardware_profile(path);
}

std::vector<std::string> shipped_profiles() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(profiles_dir(), ec))
    if (e.path().extension() == ".csv") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace moebench
