#include "harness/options.h"
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace moebench {

const char* scale_name(Scale s) {
  switch (s) {
    case Scale::tiny: return "tiny";
    case Scale::local: return "local";
    case Scale::paper: return "paper";
  }
  return "?";
}

namespace {

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

[[noreturn]] void reject(const std::string& name, const std::string& value, const std::string& problem,
                         const std::string& allowed) {
  throw CLI::ValidationError(name, "'" + value + "' " + problem + "; allowed: " + allowed);
}

// Whole number or nullopt; no sign tricks, no trailing text, no overflow.
std::optional<std::int64_t> parse_whole(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  for (std::size_t j = i; j < text.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(text[j]))) return std::nullopt;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return std::int64_t(v);
}

double parse_real(const std::string& name, const std::string& text, const std::string& allowed) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])))
    reject(name, text, "is not a number", allowed);
  if (!std::isfinite(v) || errno == ERANGE) reject(name, text, "is not a finite number", allowed);
  return v;
}

bool in_real_range(double v, RealBound lo, std::optional<double> hi) {
  const bool above_lo = lo.inclusive ? v >= lo.value : v > lo.value;
  return above_lo && (!hi || v <= *hi);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

CLI::Option* single(CLI::App& app, const std::string& names, CLI::callback_t fn, const std::string& help,
                    const std::string& type) {
  // Given twice, the last wins (an experiment script's defaults come first, the user's options after).
  return app.add_option(names, std::move(fn), help)
      ->expected(1)
      ->type_name(type)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// "-b,--min-bytes" -> "--min-bytes": messages name the long form.
std::string long_name(const std::string& names) {
  const std::size_t p = names.rfind("--");
  return p == std::string::npos ? names : names.substr(p);
}

}  // namespace

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The app's option closest to `typed` ("--tokenz" -> "--tokens"), or "" when none is close.
std::string nearest_option(const std::string& typed, const CLI::App& app) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, typed.size() / 3) + 1;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& name : o->get_lnames()) {
      const std::size_t d = edit_distance(typed, "--" + name);
      if (d < best_distance) {
        best_distance = d;
        best = "--" + name;
      }
    }
  return best;
}

// CLI11's "The following arguments were not expected: 5 --tokenz" in the suite's format:
// each unknown option with the nearest valid one; a stray value named as such.
std::string unexpected_arguments(const std::string& what, const CLI::App& app) {
  const std::size_t colon = what.find(": ");
  std::vector<std::string> words;
  std::string word;
  for (std::size_t i = colon == std::string::npos ? what.size() : colon + 2; i <= what.size(); ++i)
    if (i == what.size() || what[i] == ' ') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += what[i];
    }
  std::string out;
  for (const std::string& w : words)
    if (w.rfind("-", 0) == 0) {
      const std::string name = w.substr(0, w.find('='));
      const std::string near = nearest_option(name, app);
      out += (out.empty() ? "" : "; ") + name + ": is not an option" + (near.empty() ? "" : "; did you mean " + near + "?");
    }
  if (out.empty() && !words.empty()) out = "'" + words.back() + "': is not an option or the value of one";
  return out + " (--help lists the options)";
}

}  // namespace

std::string usage_message(const CLI::ParseError& e, const CLI::App& app) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) return unexpected_arguments(what, app);
  // CLI11 says "--tokens: 1 required INT missing" for an option given without its value.
  const std::size_t colon = what.find(": ");
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && colon != std::string::npos &&
      what.find("missing", colon) != std::string::npos) {
    const std::string name = what.substr(0, colon);
    std::string allowed;
    try {
      const std::string help = app.get_option(name)->get_description();
      const std::size_t open = help.rfind('['), close = help.rfind(']');
      if (open != std::string::npos && close != std::string::npos && close > open) allowed = help.substr(open + 1, close - open - 1);
    } catch (const CLI::OptionNotFound&) {
    }
    return name + ": needs a value" + (allowed.empty() ? "" : "; allowed: " + allowed);
  }
  return what;
}

std::string describe_whole(std::int64_t min, std::int64_t max) {
  const bool no_max = max >= std::numeric_limits<int>::max();
  if (no_max) return "a whole number >= " + std::to_string(min);
  return "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string describe_real(RealBound lo, std::optional<double> hi) {
  std::string s = std::string("a number ") + (lo.inclusive ? ">= " : "> ") + number_text(lo.value);
  if (hi) s += " and <= " + number_text(*hi);
  return s;
}

std::string describe_choice(const std::vector<std::string>& allowed) {
  std::string s;
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) s += i + 1 == allowed.size() ? " or " : ", ";
    s += allowed[i];
  }
  return s;
}

template <class T>
static CLI::Option* add_whole_as(CLI::App& app, const std::string& name, std::optional<T>& out, std::int64_t min,
                                 std::int64_t max, const std::string& help) {
  const std::string allowed = describe_whole(min, max);
  return single(
      app, name,
      [name = long_name(name), min, max, allowed, &out](const CLI::results_t& r) {
        const auto v = parse_whole(r.at(0));
        if (!v) reject(name, r.at(0), "is not a whole number", allowed);
        if (*v < min || *v > max) reject(name, r.at(0), "is out of range", allowed);
        out = T(*v);
        return true;
      },
      help + " [" + allowed + "]", "INT");
}

CLI::Option* add_whole(CLI::App& app, const std::string& name, std::optional<std::int64_t>& out, std::int64_t min,
                       std::int64_t max, const std::string& help) {
  return add_whole_as(app, name, out, min, max, help);
}

CLI::Option* add_whole(CLI::App& app, const std::string& name, std::optional<int>& out, int min, int max,
                       const std::string& help) {
  return add_whole_as(app, name, out, min, max, help);
}

CLI::Option* add_real(CLI::App& app, const std::string& name, std::optional<double>& out, RealBound lo,
                      const std::string& help, std::optional<double> hi) {
  const std::string allowed = describe_real(lo, hi);
  return single(
      app, name,
      [name = long_name(name), lo, hi, allowed, &out](const CLI::results_t& r) {
        const double v = parse_real(name, r.at(0), allowed);
        if (!in_real_range(v, lo, hi)) reject(name, r.at(0), "is out of range", allowed);
        out = v;
        return true;
      },
      help + " [" + allowed + "]", "NUM");
}

CLI::Option* add_reals(CLI::App& app, const std::string& name, std::vector<double>& out, RealBound lo,
                       const std::string& help) {
  const std::string allowed = "comma-separated numbers, each " + describe_real(lo).substr(9);  // drop "a number "
  return single(
      app, name,
      [name = long_name(name), lo, allowed, &out](const CLI::results_t& r) {
        out.clear();
        for (const std::string& item : split_commas(r.at(0))) {
          const double v = parse_real(name, item, allowed);
          if (!in_real_range(v, lo, std::nullopt)) reject(name, item, "is out of range", allowed);
          out.push_back(v);
        }
        return true;
      },
      help + " [" + allowed + "]", "NUM[,NUM...]");
}

CLI::Option* add_wholes(CLI::App& app, const std::string& name, std::vector<int>& out, int min, int max,
                        const std::string& help) {
  const std::string allowed = "comma-separated whole numbers, each " + describe_whole(min, max).substr(15);  // drop "a whole number "
  return single(
      app, name,
      [name = long_name(name), min, max, allowed, &out](const CLI::results_t& r) {
        out.clear();
        for (const std::string& item : split_commas(r.at(0))) {
          const auto v = parse_whole(item);
          if (!v) reject(name, item, "is not a whole number", allowed);
          if (*v < min || *v > max) reject(name, item, "is out of range", allowed);
          out.push_back(int(*v));
        }
        return true;
      },
      help + " [" + allowed + "]", "INT[,INT...]");
}

CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& out, const std::vector<std::string>& allowed,
                        const std::string& help) {
  const std::string words = describe_choice(allowed);
  return single(
      app, name,
      [name = long_name(name), allowed, words, &out](const CLI::results_t& r) {
        if (std::find(allowed.begin(), allowed.end(), r.at(0)) == allowed.end())
          reject(name, r.at(0), "is not one of the choices", words);
        out = r.at(0);
        return true;
      },
      help + " [" + words + "]", "NAME");
}

CLI::Option* add_choices(CLI::App& app, const std::string& name, std::vector<std::string>& out,
                         const std::vector<std::string>& allowed, const std::string& help) {
  const std::string words = "comma-separated, each " + describe_choice(allowed);
  return single(
      app, name,
      [name = long_name(name), allowed, words, &out](const CLI::results_t& r) {
        out.clear();
        for (const std::string& item : split_commas(r.at(0))) {
          if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
            reject(name, item, "is not one of the choices", words);
          if (std::find(out.begin(), out.end(), item) != out.end()) reject(name, item, "is given twice", words);
          out.push_back(item);
        }
        return true;
      },
      help + " [" + words + "]", "NAME[,NAME...]");
}

CLI::Option* add_path(CLI::App& app, const std::string& name, std::string& out, const std::string& help) {
  return single(
      app, name,
      [name = long_name(name), &out](const CLI::results_t& r) {
        if (r.at(0).empty()) reject(name, "", "is an empty path", "a file or folder path");
        out = r.at(0);
        return true;
      },
      help, "PATH");
}

namespace {
// `out` a std::string or a std::optional<std::string>: the value as given.
template <class Text>
CLI::Option* add_text_to(CLI::App& app, const std::string& name, Text& out, const std::string& type,
                         const std::string& help) {
  return single(
      app, name,
      [&out](const CLI::results_t& r) {
        out = r.at(0);
        return true;
      },
      help, type);
}
}  // namespace

CLI::Option* add_text(CLI::App& app, const std::string& name, std::string& out, const std::string& type,
                      const std::string& help) {
  return add_text_to(app, name, out, type, help);
}

CLI::Option* add_text(CLI::App& app, const std::string& name, std::optional<std::string>& out, const std::string& type,
                      const std::string& help) {
  return add_text_to(app, name, out, type, help);
}

CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& out, const std::string& help) {
  return app.add_flag(name, out, help);
}

CLI::Option* make_required(CLI::Option* option) { return option->required(); }

void add_common_options(CLI::App& app, CommonOptions& o) {
  add_choice(app, "--backend", o.backend, {"cpu", "cuda"}, "Where ops run: cpu (OpenBLAS, MPI) or cuda (cuBLAS, NCCL); default cpu");
  add_choice(app, "--scale", o.scale, {"tiny", "local", "paper"},
             "Problem sizes: tiny (tests), local (a 2-core machine), paper (the documents' own); default local");
  add_choice(app, "--dtype", o.dtype, {"fp32", "fp16", "bf16"},
             "Element type of activations and weights (cpu: fp32 only); default fp32");
  add_path(app, "--out", o.out_dir, "Folder the CSV results are written under; default results");
  add_path(app, "--trace", o.trace_dir,
           "Also write a Chrome/Perfetto trace JSON per rank here (<program>.rank<R>.json: one track per stream, "
           "ranges named like the CSV columns, communication with its bytes); open it in ui.perfetto.dev");
  add_flag(app, "--list-devices", o.list_devices, "Print how many CUDA devices this process can use, and exit");
  add_flag(app, "--profile", o.profile,
           "Bracket only the measured iterations with cudaProfilerStart/Stop (nsys --capture-range=cudaProfilerApi; cuda only)");
  add_flag(app, "--no-tensor-cores", o.no_tensor_cores, "GEMMs without tensor cores (fp32 math, pedantic for 16-bit operands; cuda only)");
  add_whole(app, "--warmup", o.warmup, 0, 1000000, "Untimed iterations before each measurement (default: by scale)");
  add_whole(app, "--iters", o.iters, 1, 1000000, "Timed iterations per repetition (default: by scale)");
  add_whole(app, "--blas-threads", o.blas_threads, 1, 1024,
            "Threads per CPU GEMM (cpu backend; default: OpenBLAS's, OPENBLAS_NUM_THREADS, which the experiment scripts "
            "set to 1: ranks x busy streams x these should not exceed the cores)");
  add_whole(app, "--repetitions", o.repetitions, 1, 1000,
            "Repetitions of each measurement; the CSV gives their median and spread (default: by scale)");
  add_real(app, "--comm-timeout", o.comm_timeout_s, above(0),
           "Seconds a communication operation may take before the whole job is ended (default 300)", 1e7);
  add_real(app, "--link-bandwidth", o.link_bandwidth_GBps, above(0),
           "Emulate an interconnect of this many GB/s between the ranks (cpu backend): every operation takes at least "
           "latency + bus bytes / bandwidth; rows are labelled emulated",
           1e6);
  add_real(app, "--link-latency", o.link_latency_us, at_least(0),
           "Latency of the emulated interconnect in microseconds (default 0; needs --link-bandwidth)", 1e9);
}

std::optional<std::uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::uint64_t mult = 1;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: return std::nullopt;
    }
    ++i;
    if (i < text.size() && std::toupper(static_cast<unsigned char>(text[i])) == 'B') ++i;
  }
  if (i != text.size()) return std::nullopt;
  if (v > UINT64_MAX / mult) return std::nullopt;
  return v * mult;
}

std::string format_size(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

}  // namespace moebench
