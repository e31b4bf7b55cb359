#include "tools/claims/ledger.h"
#include "tools/claims/node_setting.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <filesystem>
#include "harness/csv.h"
#include "models/paper_values.h"
#include "kernels/exec.h"

namespace moebench {

namespace {

std::string num(double v) { return fmt(v, 3); }
std::string range(const Number& n) {
  return n.lo == n.hi ? num(n.v) : num(n.v) + " [" + num(n.lo) + ", " + num(n.hi) + "]";
}
double tolerance_of(const std::string& judge, const std::string& cls) {
  const std::string value = judge.substr(cls.size() + 1);
  char* end = nullptr;
  const double t = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(t >= 0)) throw Error("claims.csv: judge '" + judge + "': no tolerance after ':'");
  return t;
}
bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string provenance_of(const CsvRows& t, std::string* device, std::string* setting, std::string* backend,
                          std::string* link, RunOrigin* origin) {
  if (t.size() == 0) return "-";
  auto c = [&](const char* col) { return t.has(col) ? t.cell(0, col) : std::string("-"); };
  *device = c("device");
  *backend = c("backend");
  *link = c("link");
  *origin = {c("commit"), c("date"), c("backend"), c("scale")};
  // What may cause a number, said in the judged line: ranks sharing cores, a link that sleeps.
  const std::string cores = t.has("processors") ? c("processors") : t.has("simulator_processors") ? c("simulator_processors") : "";
  const std::string sleeps = starts(c("link"), "emulated") ? " (a link that sleeps, using no core)" : "";
  *setting = c("backend") + " " + c("device") + ", " + c("ranks") + " ranks" +
             (cores.empty() || cores == "-" ? "" : " (" + cores + ")") + ", " + c("link") + sleeps + ", " + c("scale") + " scale";
  return c("backend") + " " + c("device") + ", " + c("ranks") + " ranks, " + c("link") + ", " + c("dtype") + ", " +
         c("scale") + " scale, " + c("commit") + ", " + c("date");
}

// Why a number read from CSVs of these backends and links cannot judge a claim about the
// behaviour of other hardware (ClaimSpec::relevant_hardware), or nothing where it can.
std::optional<std::string> off_one(const ClaimSpec& spec, const std::string& kind,
                                   const std::vector<std::string>& backends, const std::vector<std::string>& links,
                                   const std::vector<std::string>& processors, const std::vector<std::string>& nodes) {
  if (kind == "nodes") {
    for (const std::string& n : nodes)
      if (!several_nodes(n))
        return "a claim that rests on the split between a node's fast links and the slower network between nodes: "
               "this run's ranks shared " + (n == "-" || n.empty() ? std::string("one host") : n + " host(s)") +
               " and its flat network";
  } else if (kind == "gpu") {
    for (const std::string& b : backends)
      if (b != "cuda")
        return "a claim about GPU behaviour (kernels, tensor cores, a GPU's memory or its overlap of communication "
               "with compute): a number from the " + b + " backend does not judge it";
  } else if (kind == "core_link") {
    for (const std::string& l : links)
      if (l.rfind("emulated", 0) == 0)
        return "a claim about compute slowing communication: the emulated link (" + l +
               ") sleeps without using a core, so compute cannot slow it by construction";
  } else if (kind == "core_per_stage" || kind == "core_per_rank") {
    for (const std::string& p : processors) {
      if (p == "-" || p.empty())
        return std::string("a claim that needs a core per ") + (kind == "core_per_stage" ? "stage" : "rank") +
               ": a row it reads does not say what cores its ranks had (no processors column)";
      if (p.find("shared by the") != std::string::npos)
        return kind == "core_per_stage"
                   ? "a claim about a pipeline schedule's bubble: here " + p +
                         ", so a stage waits for a core as well as for its peer, and the bubble measured is this "
                         "machine's, not the schedule's"
                   : "a claim about how a step's time divides among its phases: here " + p +
                         ", so a rank's wait for a core lands in whichever phase it was in, and the split measured is "
                         "this machine's scheduling, not the step's";
    }
  } else {
    throw Error("claims.csv: " + spec.id + ": relevant_hardware '" + spec.relevant_hardware +
                "' is not one of: (empty), gpu, core_link, core_per_stage, core_per_rank, nodes, or several joined by +");
  }
  return std::nullopt;
}

std::optional<std::string> off_the_relevant_hardware(const ClaimSpec& spec, const std::vector<std::string>& backends,
                                                     const std::vector<std::string>& links,
                                                     const std::vector<std::string>& processors,
                                                     const std::vector<std::string>& nodes) {
  std::istringstream kinds(spec.relevant_hardware);
  for (std::string kind; std::getline(kinds, kind, '+');)
    if (auto why = off_one(spec, kind, backends, links, processors, nodes)) return why;
  return std::nullopt;
}

// `measured`: a run's numbers (this machine's, a GPU's), held to the claim's relevant hardware;
// the model's are not.
SettingResult evaluate_setting(const ClaimSpec& spec, double paper, const std::string& expression, const std::string& root,
                               const std::string& paper_hardware, bool absolute, bool measured = true) {
  SettingResult s;
  if (expression.empty()) {
    s.missing = "no expression for this setting";
    return s;
  }
  ResultFiles files(root);
  const Evaluation e = evaluate(expression, files);
  std::vector<std::string> backends, links, processors, nodes;  // of every CSV read (harness/processors.h)
  for (const std::string& f : e.files) {
    s.files += (s.files.empty() ? "" : " ") + f;
    std::string device, setting, backend, link;
    RunOrigin origin;
    if (const CsvRows* t = files.get(f)) {
      s.provenance_of[f] = provenance_of(*t, &device, &setting, &backend, &link, &origin);
      s.origin_of[f] = origin;
      backends.push_back(backend);
      links.push_back(link);
      // Every row the expression read: one run's rows may come from several launches.
      const bool says = t->has("simulator_processors") || t->has("processors");
      const auto read = e.rows.find(f);
      for (std::size_t r : read != e.rows.end() ? read->second : std::set<std::size_t>{}) {
        for (const char* column : {"simulator_processors", "processors"})
          if (t->has(column)) processors.push_back(t->cell(r, column));
        if (!says) processors.push_back("-");
        nodes.push_back(t->has("nodes") ? t->cell(r, "nodes") : "-");
      }
    }
    if (s.provenance.empty() && s.provenance_of.count(f))
      s.provenance = s.provenance_of[f], s.device = device, s.setting = setting;
  }
  if (!e.value) {
    s.missing = e.missing;
    // A run over two nodes that could not be made says why (tools/claims/node_setting.h).
    for (const std::string& f : e.files)
      if (f.rfind(kNodesFolder, 0) == 0 && !files.get(f))
        if (const auto why = nodes_not_measured(root)) s.missing = *why;
    return s;
  }
  s.value = e.value;
  if (const auto why = measured ? off_the_relevant_hardware(spec, backends, links, processors, nodes) : std::nullopt) {
    s.verdict = kOffHardware;
    s.why = *why;
    return s;
  }
  if (absolute && (paper_hardware.empty() || s.device.find(paper_hardware) == std::string::npos)) {
    s.verdict = "not comparable";
    s.why = "an absolute " + spec.unit + " on " + (paper_hardware.empty() ? "the paper's hardware" : paper_hardware) +
            "; this number is from " + (s.device.empty() ? "another machine" : s.device);
    return s;
  }
  // The margin is for this machine's launches, whose spread the stability runs measure.
  const bool cpu = std::find(backends.begin(), backends.end(), "cpu") != backends.end();
  const Judgement j = judge_number(spec, paper, *s.value, measured && cpu ? kRatioMargin : 0);
  s.verdict = j.verdict;
  s.why = j.why;
  s.reaches = j.reaches;
  return s;
}

// What the assumed inputs decide of a claim's modelled number, from the sensitivity rows of
// that claim (already ordered by how far each input moves it).
void describe_assumptions(const CsvRows& t, ClaimResult& c) {
  auto said = [&](std::size_t r) {
    auto x = [&](const char* col) { return t.cell(r, col); };
    return x("profile") + " " + x("input") + " from " + x("input_low") + " to " + x("input_high") + " " + x("unit") +
           " (the profile's " + x("input_base") + ") moves it from " + x("claim_at_low") + " to " + x("claim_at_high");
  };
  std::vector<std::size_t> rows, changing;
  for (std::size_t r = 0; r < t.size(); ++r)
    if (t.cell(r, "claim") == c.spec.id) {
      rows.push_back(r);
      if (t.cell(r, "verdict_changes") == "yes") changing.push_back(r);
    }
  if (rows.empty()) {
    c.model_assumptions = "no assumed input moves it by more than 0.1%";
    return;
  }
  if (changing.empty()) {
    c.model_assumptions = "no assumed input changes its verdict within its range; the most: " + said(rows[0]);
    return;
  }
  c.rests_on_assumption = true;
  c.model_assumptions = "rests on an assumption: ";
  for (std::size_t i = 0; i < changing.size() && i < 2; ++i) {
    const std::size_t r = changing[i];
    c.model_assumptions += (i ? "; " : "") + said(r) + " (" + t.cell(r, "verdict_at_low") + " to " +
                           t.cell(r, "verdict_at_high") + ")";
  }
  if (changing.size() > 2) c.model_assumptions += "; and " + std::to_string(changing.size() - 2) + " more";
}

// How many times one value is the other, either way (infinite across 0).
double ratio_factor(double v, double paper) {
  if (v == paper) return 1;
  if (v == 0 || paper == 0 || (v > 0) != (paper > 0)) return INFINITY;
  return std::max(v / paper, paper / v);
}
std::string factor_text(double v, double paper) {
  const double f = ratio_factor(v, paper);
  return std::isfinite(f) ? num(f) + "x" : "not a multiple of the paper's,";
}
// at_least / at_most: the least value partly reaches, half the paper's effect past the baseline
// (without one, there is no partly: the paper's value itself).
double partly_bound(double paper, const std::optional<double>& baseline) {
  return baseline ? *baseline + (paper - *baseline) / 2 : paper;
}

// The verdict of ours' median under the claim's tolerance class (noise from its range).
Judgement judge_value(const ClaimSpec& spec, double paper, const Number& ours, double ratio_margin) {
  const std::string& judge = spec.judge;
  std::optional<double> baseline;
  if (!spec.baseline.empty()) baseline = std::strtod(spec.baseline.c_str(), nullptr);
  // Noise: the run's range holds the no-effect value (or the threshold), so it does not give the
  // effect's direction -- a re-run may land on either side. A ratio's range must clear it by
  // `ratio_margin` besides (kRatioMargin on this machine's numbers).
  const double margin = spec.unit == "x" ? ratio_margin : 0;
  auto noise = [&](double x) {
    return ours.lo < ours.hi && ours.lo <= x + std::fabs(x) * margin && x - std::fabs(x) * margin <= ours.hi;
  };
  auto holds = [&](double x) {
    return ours.lo <= x && x <= ours.hi ? std::string("holds ")
                                        : "comes within " + num(100 * margin) + "% of ";
  };
  const std::string unit = spec.unit.empty() ? "" : " " + spec.unit;
  const std::string said = "ours " + range(ours) + (paper != 0 ? ", " + num(ours.v / paper) + "x the paper's " + num(paper) : "");
  // Magnitude before noise: a range whose every point is past the claim's partly bound (or on
  // the wrong side of its threshold) is not reproduced, though it holds the no-effect value.
  const double nearest = std::clamp(paper, ours.lo, ours.hi);
  if (starts(judge, "above:") || starts(judge, "below:")) {
    const double x = tolerance_of(judge, judge.substr(0, 5));
    const bool above = judge[0] == 'a';
    if (above ? ours.hi < x : ours.lo > x)
      return {"not reproduced", "ours " + range(ours) + ": the whole range is " + (above ? "below " : "above ") + num(x) +
                                    (paper != 0 ? " (the paper's " + num(paper) + ")" : "")};
    if (noise(x))
      return {"noise", "ours " + range(ours) + ": the run's range " + holds(x) + num(x) +
                           ", the claim's threshold, so it gives no direction"};
    const bool holds = above ? ours.v > x : ours.v < x;
    return {holds ? "reproduced" : "not reproduced",
            "ours " + range(ours) + (holds ? " is " : " is not ") + (above ? "above " : "below ") + num(x) +
                (paper != 0 ? " (the paper's " + num(paper) + ")" : "")};
  }
  if (starts(judge, "match:") && ours.lo < ours.hi) {
    const double p = tolerance_of(judge, "match") / 100;
    if (ratio_factor(nearest, paper) > 1 + 2 * p)
      return {"not reproduced", said + ": even the range's point nearest the paper's, " + num(nearest) + ", is " +
                                    factor_text(nearest, paper) + " off, past a factor of " + num(1 + 2 * p)};
  }
  if ((judge == "at_least" || judge == "at_most") && ours.lo < ours.hi) {
    const bool least = judge == "at_least";
    const double bound = partly_bound(paper, baseline);
    if (least ? ours.hi < bound : ours.lo > bound)
      return {"not reproduced", "ours " + range(ours) + ": the whole range is " + (least ? "below " : "above ") +
                                    (baseline ? num(bound) + ", half the paper's effect past " + num(*baseline) + " (the paper's " +
                                                    num(paper) + ")"
                                              : "the paper's " + num(paper))};
  }
  if (baseline && noise(*baseline))
    return {"noise", said + "; the run's range " + holds(*baseline) + num(*baseline) +
                         ", the no-effect value, so it gives no direction"};
  const bool same_side = baseline && (ours.v - *baseline) * (paper - *baseline) > 0;
  if (starts(judge, "match:")) {
    // Within a factor, the same above the paper's value as below it: reproduced within 1 + P,
    // partly within 1 + 2P, and on the paper's side of the baseline where there is one.
    const double p = tolerance_of(judge, "match") / 100;
    const double f = ratio_factor(ours.v, paper);
    if (f <= 1 + p && (!baseline || same_side)) return {"reproduced", said + " (within a factor of " + num(1 + p) + ")"};
    if (baseline && !same_side) return {"not reproduced", said + ": the other side of " + num(*baseline)};
    if (f <= 1 + 2 * p)
      return {"partly", said + (baseline ? ": the same direction, within a factor of " : ": within a factor of ") +
                            num(1 + 2 * p) + ", not " + num(1 + p)};
    return {"not reproduced", said + (baseline ? ": the same direction, but " : ": ") + factor_text(ours.v, paper) +
                                  " off, more than a factor of " + num(1 + 2 * p)};
  }
  if (starts(judge, "within:")) {
    // A share (unit %) is also held to a factor of 2 of the paper's: points alone would pass a
    // sixth of a small share.
    const double d = tolerance_of(judge, "within");
    const double off = std::fabs(ours.v - paper);
    const bool share = spec.unit == "%" && paper > 0;
    const double factor = !share ? 1.0 : ours.v > 0 ? std::max(ours.v / paper, paper / ours.v) : INFINITY;
    const std::string what = "ours " + range(ours) + " against the paper's " + num(paper) + unit;
    if (factor > 2 && off <= 2 * d)
      return {"not reproduced", what + " (within " + num(off <= d ? d : 2 * d) + " points, but " +
                                    (std::isfinite(factor) ? num(factor) + "x" : "not a share of") + " the paper's share: "
                                    "more than a factor of 2)"};
    if (off <= d) return {"reproduced", what + " (within " + num(d) + (share ? " points and a factor of 2)" : ")")};
    if (off <= 2 * d) return {"partly", what + " (within " + num(2 * d) + ", not " + num(d) + ")"};
    return {"not reproduced", what + " (off by " + num(off) + ")"};
  }
  if (judge == "at_least" || judge == "at_most") {
    const bool least = judge == "at_least";
    if (least ? ours.v >= paper : ours.v <= paper)
      return {"reproduced", "ours " + range(ours) + (least ? " is at least " : " is at most ") + "the paper's " + num(paper)};
    // Partly: at least half the paper's effect past the baseline.
    if (same_side && (least ? ours.v >= partly_bound(paper, baseline) : ours.v <= partly_bound(paper, baseline)))
      return {"partly", "ours " + range(ours) + " is past " + num(*baseline) + " as the paper's, by at least half its "
                            "effect, but " + (least ? "below" : "above") + " its " + num(paper)};
    return {"not reproduced", "ours " + range(ours) + (least ? " is below " : " is above ") + "the paper's " + num(paper) +
                                  (baseline ? " and on the other side of " + num(*baseline) : "")};
  }
  throw Error("claims.csv: " + spec.id + ": judge '" + judge +
              "' is not one of match:P, within:D, at_least, at_most, above:X, below:X, none");
}

// The suite's other settings against the verdict of `measured`: a reproduced or partly verdict of
// this machine's that the GPU run or the model at the paper's scale says is not reproduced becomes
// kContradicted (a GPU run's, on the hardware the claims are about, is not overruled by the CPU or
// the model); every disagreement is said in the line.
// `model_off`: why the model may not overrule (ClaimSpec::model_base), or nullopt.
void contradict(ClaimResult& c, const SettingResult& measured, const std::optional<std::string>& model_off) {
  const std::string said = c.verdict;
  auto judged = [](const std::string& v) { return v == "reproduced" || v == "partly" || v == "not reproduced"; };
  for (auto [other, name] : {std::pair{&c.gpu, "the GPU run"}, std::pair{&c.local, "this machine"},
                             std::pair{&c.model, "the model at the paper's scale"}}) {
    if (other == &measured || !other->value || !judged(other->verdict) || other->verdict == said || !judged(said)) continue;
    if (other == &c.model && model_off) {
      c.why += std::string("; the model at the paper's scale says ") + other->verdict + " (" + other->why +
               "), but does not overrule: " + *model_off;
      continue;
    }
    const bool against = other->verdict == "not reproduced" && said != "not reproduced" && &measured == &c.local;
    c.why += std::string(against ? "; contradicted by " : "; ") + name + (against ? "" : " says") + " (" +
             other->verdict + ": " + other->why + ")";
    if (against) c.verdict = kContradicted;
  }
}

}  // namespace

Judgement judge_number(const ClaimSpec& spec, double paper, const Number& ours, double ratio_margin) {
  Judgement j = judge_value(spec, paper, ours, ratio_margin);
  if (ours.lo == ours.hi || j.verdict == "noise") return j;
  for (double end : {ours.lo, ours.hi}) {
    const std::string v = judge_value(spec, paper, Number::exact(end), 0).verdict;
    if (v != j.verdict && std::find(j.reaches.begin(), j.reaches.end(), v) == j.reaches.end()) j.reaches.push_back(v);
  }
  for (std::size_t i = 0; i < j.reaches.size(); ++i)
    j.why += (i ? " and " : "; its range reaches ") + j.reaches[i];
  return j;
}

std::vector<ClaimSpec> read_claim_specs(const std::string& path) {
  const CsvRows t = CsvRows::read(path);
  std::vector<ClaimSpec> v;
  for (std::size_t r = 0; r < t.size(); ++r) {
    auto c = [&](const char* col) { return t.cell(r, col); };
    v.push_back({c("claim"), c("paper"), c("where"), c("text"), c("quantity"), c("paper_value"), c("unit"), c("judge"),
                 c("baseline"), c("hardware"), c("local"), c("gpu"), c("model"), c("why_not"), c("cluster_command"),
                 c("note"), c("relevant_hardware"), c("model_base")});
    const ClaimSpec& s = v.back();
    if (s.quantity != "relative" && s.quantity != "absolute")
      throw Error(path + ": " + s.id + ": quantity '" + s.quantity + "' is not relative or absolute");
    for (std::size_t i = 0; i + 1 < v.size(); ++i)
      if (v[i].id == s.id) throw Error(path + ": claim " + s.id + " twice");
  }
  for (const ClaimSpec& s : v) {
    std::istringstream ids(s.model_base);
    for (std::string id; ids >> id;) {
      const auto base = std::find_if(v.begin(), v.end(), [&](const ClaimSpec& o) { return o.id == id; });
      if (base == v.end() || base->model.empty() || base->judge == "none")
        throw Error(path + ": " + s.id + ": model_base '" + id + "' is not a claim with a modelled number");
    }
  }
  return v;
}

double claim_paper_value(const ClaimSpec& spec) {
  ResultFiles none("");  // the paper's value reads values.csv only
  const Evaluation p = evaluate(spec.paper_value, none);
  if (!p.value || !p.files.empty()) throw Error("claims.csv: " + spec.id + ": paper_value must use paper() and numbers only");
  return p.value->v;
}

std::optional<RunOrigin> newest_local_run(const std::vector<ClaimSpec>& specs, const std::string& results) {
  std::optional<RunOrigin> newest;
  for (const ClaimSpec& spec : specs) {
    if (spec.judge == "none" || spec.local.empty()) continue;
    const SettingResult s = evaluate_setting(spec, claim_paper_value(spec), spec.local, results, spec.hardware, false, false);
    for (const auto& [f, o] : s.origin_of)
      if (o.backend != "model" && o.date != "-" && (!newest || o.date > newest->date)) newest = o;
  }
  return newest;
}

std::string ledger_checkout() {
  return (std::filesystem::path(reference_dir()) / ".." / "..").lexically_normal().string();
}

namespace {

// Why a claim's stale GPU number is shown and not used.
std::string gpu_unused(const ClaimResult& c) { return "the GPU run's " + range(*c.gpu.value) + " is not used: " + c.gpu.why; }

}  // namespace

std::vector<ClaimResult> judge_claims(const std::vector<ClaimSpec>& specs, const std::string& results) {
  return judge_claims(specs, results, ledger_checkout());
}

std::vector<ClaimResult> judge_claims(const std::vector<ClaimSpec>& specs, const std::string& results,
                                      const std::string& repo) {
  const std::optional<RunOrigin> local_run = newest_local_run(specs, results);
  std::vector<ClaimResult> out;
  std::vector<SettingResult ClaimResult::*> measured_of;  // which setting judged each claim, for the contradictions
  std::optional<CsvRows> sensitivity;
  if (std::ifstream(results + "/models/sensitivity.csv")) sensitivity = CsvRows::read(results + "/models/sensitivity.csv");
  for (const ClaimSpec& spec : specs) {
    ClaimResult c;
    c.spec = spec;
    if (spec.judge == "none") {
      c.verdict = "not measurable here";
      c.why = spec.why_not;
      out.push_back(c);
      measured_of.push_back(nullptr);
      continue;
    }
    c.paper = claim_paper_value(spec);
    const bool absolute = spec.quantity == "absolute";
    c.local = evaluate_setting(spec, c.paper, spec.local, results, spec.hardware, absolute);
    c.gpu = evaluate_setting(spec, c.paper, spec.gpu == "=" ? spec.local : spec.gpu, results + "/cuda", spec.hardware, absolute);
    if (c.gpu.value)
      for (const auto& [f, o] : c.gpu.origin_of) {
        const std::optional<std::string> stale =
            local_run ? stale_gpu_evidence(repo, o, *local_run) : std::optional<std::string>("no run of this machine's to compare it with");
        if (!stale) continue;
        c.gpu.verdict = kStaleEvidence;
        c.gpu.why = "cuda/" + f + ": " + *stale;
        break;
      }
    c.model = evaluate_setting(spec, c.paper, spec.model, results, spec.hardware, false, false);
    if (c.model.value && sensitivity) describe_assumptions(*sensitivity, c);
    const SettingResult* measured = nullptr;
    const char* where = "";
    auto judges = [](const SettingResult& s) {
      return s.value && s.verdict != "not comparable" && s.verdict != kOffHardware && s.verdict != kStaleEvidence;
    };
    if (judges(c.gpu))
      measured = &c.gpu, where = "GPU run";
    else if (judges(c.local))
      measured = &c.local, where = "this machine";
    if (measured) {
      c.verdict = measured->verdict;
      c.reaches = measured->reaches;
      c.why = std::string(where) + " (" + measured->setting + "): " + measured->why;
    } else if (c.local.verdict == kOffHardware || c.gpu.verdict == kOffHardware) {
      const SettingResult& off = c.local.verdict == kOffHardware ? c.local : c.gpu;
      c.verdict = kOffHardware;
      c.why = off.why + " (" + off.setting + ": " + range(*off.value) + ")" +
              (c.model.value ? "; the model at the paper's scale: " + c.model.verdict + ", " + c.model.why : "") +
              (c.gpu.verdict == kStaleEvidence ? "; " + gpu_unused(c) : "");
    } else if (c.gpu.verdict == kStaleEvidence && !c.model.value) {
      c.verdict = "not measurable here";
      c.why = gpu_unused(c);
    } else if (c.model.value) {
      c.verdict = "modelled only";
      c.why = "the model at the paper's scale (" + c.model.verdict + "): " + c.model.why +
              (c.model_assumptions.empty() ? "" : "; " + c.model_assumptions) +
              (c.gpu.verdict == kStaleEvidence ? "; " + gpu_unused(c) : "");
    } else {
      c.verdict = "not measurable here";
      c.why = !spec.why_not.empty() ? spec.why_not
              : c.local.verdict == "not comparable" ? c.local.why
              : c.local.missing.rfind("not measured here", 0) == 0 ? c.local.missing
              : "no run holds it: " + c.local.missing;
    }
    out.push_back(c);
    measured_of.push_back(measured == &c.gpu ? &ClaimResult::gpu : measured == &c.local ? &ClaimResult::local : nullptr);
  }
  // The other settings against each measured verdict, once every claim's model is known.
  for (std::size_t i = 0; i < out.size(); ++i) {
    ClaimResult& c = out[i];
    if (!measured_of[i]) continue;
    std::optional<std::string> model_off;
    std::istringstream ids(c.spec.model_base);
    for (std::string id; ids >> id;) {
      const auto base = std::find_if(out.begin(), out.end(), [&](const ClaimResult& o) { return o.spec.id == id; });
      // A ledger of some claims only (node_setting.h's) may leave the base out: then unchecked.
      if (base != out.end() && (base->model.verdict == "reproduced" || base->model.verdict == "partly")) continue;
      model_off = (model_off ? *model_off + "; " : std::string("its own ")) + id + " is " +
                  (base == out.end()    ? std::string("not judged in this ledger")
                   : base->model.value ? fmt(base->model.value->v / base->paper, 3) + "x the paper's (" + base->model.verdict + ")"
                                       : "not modelled");
    }
    contradict(c, c.*measured_of[i], model_off);
    if (c.gpu.verdict == kStaleEvidence && c.gpu.value)
      c.why += "; " + gpu_unused(c);
  }
  return out;
}

}  // namespace moebench
