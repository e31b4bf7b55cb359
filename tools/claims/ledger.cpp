#include "tools/claims/ledger.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include "harness/csv.h"
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

std::string provenance_of(const CsvRows& t, std::string* device, std::string* setting) {
  if (t.size() == 0) return "-";
  auto c = [&](const char* col) { return t.has(col) ? t.cell(0, col) : std::string("-"); };
  *device = c("device");
  *setting = c("backend") + " " + c("device") + ", " + c("ranks") + " ranks, " + c("link") + ", " + c("scale") + " scale";
  return c("backend") + " " + c("device") + ", " + c("ranks") + " ranks, " + c("link") + ", " + c("dtype") + ", " +
         c("scale") + " scale, " + c("commit") + ", " + c("date");
}

SettingResult evaluate_setting(const ClaimSpec& spec, double paper, const std::string& expression, const std::string& root,
                               const std::string& paper_hardware, bool absolute) {
  SettingResult s;
  if (expression.empty()) {
    s.missing = "no expression for this setting";
    return s;
  }
  ResultFiles files(root);
  const Evaluation e = evaluate(expression, files);
  for (const std::string& f : e.files) {
    s.files += (s.files.empty() ? "" : " ") + f;
    std::string device, setting;
    if (const CsvRows* t = files.get(f)) s.provenance_of[f] = provenance_of(*t, &device, &setting);
    if (s.provenance.empty() && s.provenance_of.count(f))
      s.provenance = s.provenance_of[f], s.device = device, s.setting = setting;
  }
  if (!e.value) {
    s.missing = e.missing;
    return s;
  }
  s.value = e.value;
  if (absolute && (paper_hardware.empty() || s.device.find(paper_hardware) == std::string::npos)) {
    s.verdict = "not comparable";
    s.why = "an absolute " + spec.unit + " on " + (paper_hardware.empty() ? "the paper's hardware" : paper_hardware) +
            "; this number is from " + (s.device.empty() ? "another machine" : s.device);
    return s;
  }
  const Judgement j = judge_number(spec, paper, *s.value);
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

// The verdict of ours' median under the claim's tolerance class (noise from its range).
Judgement judge_value(const ClaimSpec& spec, double paper, const Number& ours) {
  const std::string& judge = spec.judge;
  std::optional<double> baseline;
  if (!spec.baseline.empty()) baseline = std::strtod(spec.baseline.c_str(), nullptr);
  // Noise: the run's range holds the no-effect value (or the threshold) and is as wide as the
  // effect the paper claims beyond it -- the spread alone could decide the verdict.
  auto noise = [&](double x) { return ours.lo <= x && x <= ours.hi && ours.hi - ours.lo >= std::fabs(paper - x); };
  const std::string unit = spec.unit.empty() ? "" : " " + spec.unit;
  const std::string said = "ours " + range(ours) + (paper != 0 ? ", " + num(ours.v / paper) + "x the paper's " + num(paper) : "");
  if (starts(judge, "above:") || starts(judge, "below:")) {
    const double x = tolerance_of(judge, judge.substr(0, 5));
    const bool above = judge[0] == 'a';
    if (noise(x))
      return {"noise", "ours " + range(ours) + ": the run's range holds " + num(x) + ", the claim's threshold, and is as wide as "
                       "the paper's distance from it"};
    const bool holds = above ? ours.v > x : ours.v < x;
    return {holds ? "reproduced" : "not reproduced",
            "ours " + range(ours) + (holds ? " is " : " is not ") + (above ? "above " : "below ") + num(x) +
                (paper != 0 ? " (the paper's " + num(paper) + ")" : "")};
  }
  if (baseline && noise(*baseline))
    return {"noise", said + "; the run's range holds " + num(*baseline) + ", the no-effect value, and is as wide as the effect claimed"};
  const bool same_side = baseline && (ours.v - *baseline) * (paper - *baseline) > 0;
  if (starts(judge, "match:")) {
    const double p = tolerance_of(judge, "match") / 100;
    const double off = std::fabs(ours.v / paper - 1);
    if (off <= p) return {"reproduced", said + " (within " + num(100 * p) + "%)"};
    if (baseline ? same_side : off <= 2 * p)
      return {"partly", said + (baseline ? ": the same direction, not within " : ": not within ") + num(100 * p) + "%"};
    return {"not reproduced", said + (baseline ? ": the other side of " + num(*baseline) : ": off by more than " + num(200 * p) + "%")};
  }
  if (starts(judge, "within:")) {
    const double d = tolerance_of(judge, "within");
    const double off = std::fabs(ours.v - paper);
    const std::string what = "ours " + range(ours) + " against the paper's " + num(paper) + unit;
    if (off <= d) return {"reproduced", what + " (within " + num(d) + ")"};
    if (off <= 2 * d) return {"partly", what + " (within " + num(2 * d) + ", not " + num(d) + ")"};
    return {"not reproduced", what + " (off by " + num(off) + ")"};
  }
  if (judge == "at_least" || judge == "at_most") {
    const bool least = judge == "at_least";
    if (least ? ours.v >= paper : ours.v <= paper)
      return {"reproduced", "ours " + range(ours) + (least ? " is at least " : " is at most ") + "the paper's " + num(paper)};
    if (same_side)
      return {"partly", "ours " + range(ours) + " is past " + num(*baseline) + " as the paper's, but " +
                            (least ? "below" : "above") + " its " + num(paper)};
    return {"not reproduced", "ours " + range(ours) + (least ? " is below " : " is above ") + "the paper's " + num(paper) +
                                  (baseline ? " and on the other side of " + num(*baseline) : "")};
  }
  throw Error("claims.csv: " + spec.id + ": judge '" + judge +
              "' is not one of match:P, within:D, at_least, at_most, above:X, below:X, none");
}

}  // namespace

Judgement judge_number(const ClaimSpec& spec, double paper, const Number& ours) {
  Judgement j = judge_value(spec, paper, ours);
  if (ours.lo == ours.hi || j.verdict == "noise") return j;
  for (double end : {ours.lo, ours.hi}) {
    const std::string v = judge_value(spec, paper, Number::exact(end)).verdict;
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
                 c("note")});
    const ClaimSpec& s = v.back();
    if (s.quantity != "relative" && s.quantity != "absolute")
      throw Error(path + ": " + s.id + ": quantity '" + s.quantity + "' is not relative or absolute");
    for (std::size_t i = 0; i + 1 < v.size(); ++i)
      if (v[i].id == s.id) throw Error(path + ": claim " + s.id + " twice");
  }
  return v;
}

double claim_paper_value(const ClaimSpec& spec) {
  ResultFiles none("");  // the paper's value reads values.csv only
  const Evaluation p = evaluate(spec.paper_value, none);
  if (!p.value || !p.files.empty()) throw Error("claims.csv: " + spec.id + ": paper_value must use paper() and numbers only");
  return p.value->v;
}

std::vector<ClaimResult> judge_claims(const std::vector<ClaimSpec>& specs, const std::string& results) {
  std::vector<ClaimResult> out;
  std::optional<CsvRows> sensitivity;
  if (std::ifstream(results + "/models/sensitivity.csv")) sensitivity = CsvRows::read(results + "/models/sensitivity.csv");
  for (const ClaimSpec& spec : specs) {
    ClaimResult c;
    c.spec = spec;
    if (spec.judge == "none") {
      c.verdict = "not measurable here";
      c.why = spec.why_not;
      out.push_back(c);
      continue;
    }
    c.paper = claim_paper_value(spec);
    const bool absolute = spec.quantity == "absolute";
    c.local = evaluate_setting(spec, c.paper, spec.local, results, spec.hardware, absolute);
    c.gpu = evaluate_setting(spec, c.paper, spec.gpu == "=" ? spec.local : spec.gpu, results + "/cuda", spec.hardware, absolute);
    c.model = evaluate_setting(spec, c.paper, spec.model, results, spec.hardware, false);
    if (c.model.value && sensitivity) describe_assumptions(*sensitivity, c);
    const SettingResult* measured = nullptr;
    const char* where = "";
    if (c.gpu.value && c.gpu.verdict != "not comparable")
      measured = &c.gpu, where = "GPU run";
    else if (c.local.value && c.local.verdict != "not comparable")
      measured = &c.local, where = "this machine";
    if (measured) {
      c.verdict = measured->verdict;
      c.reaches = measured->reaches;
      c.why = std::string(where) + " (" + measured->setting + "): " + measured->why;
    } else if (c.model.value) {
      c.verdict = "modelled only";
      c.why = "the model at the paper's scale (" + c.model.verdict + "): " + c.model.why +
              (c.model_assumptions.empty() ? "" : "; " + c.model_assumptions);
    } else {
      c.verdict = "not measurable here";
      c.why = !spec.why_not.empty() ? spec.why_not
              : c.local.verdict == "not comparable" ? c.local.why
              : "no run holds it: " + c.local.missing;
    }
    out.push_back(c);
  }
  return out;
}

std::string claims_csv(const std::vector<ClaimResult>& claims) {
  CsvTable t({"claim", "paper", "where", "text", "paper_value", "unit", "judge", "local_value", "local_low", "local_high",
              "local_over_paper", "local_verdict", "local_csv", "local_provenance", "gpu_value", "gpu_over_paper",
              "gpu_verdict", "gpu_csv", "gpu_provenance", "model_value", "model_over_paper", "model_verdict", "model_csv",
              "model_assumptions", "verdict", "why", "cluster_command"});
  for (const ClaimResult& c : claims) {
    auto value = [](const SettingResult& s) { return s.value ? fmt(s.value->v, 4) : std::string("-"); };
    auto ratio = [&](const SettingResult& s) {
      return s.value && c.paper != 0 ? fmt(s.value->v / c.paper, 4) : std::string("-");
    };
    auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
    const bool judged = c.spec.judge != "none";
    t.add_row({c.spec.id, c.spec.paper, c.spec.where, c.spec.text, judged ? fmt(c.paper, 4) : "-", or_dash(c.spec.unit),
               c.spec.judge, value(c.local), c.local.value ? fmt(c.local.value->lo, 4) : "-",
               c.local.value ? fmt(c.local.value->hi, 4) : "-", ratio(c.local), or_dash(c.local.verdict),
               or_dash(c.local.files), or_dash(c.local.value ? c.local.provenance : ""), value(c.gpu), ratio(c.gpu),
               or_dash(c.gpu.verdict), or_dash(c.gpu.value ? c.gpu.files : ""), or_dash(c.gpu.value ? c.gpu.provenance : ""),
               value(c.model), ratio(c.model), or_dash(c.model.verdict), or_dash(c.model.value ? c.model.files : ""),
               or_dash(c.model_assumptions), c.verdict, c.why, or_dash(c.spec.cluster_command)});
  }
  return t.to_string(nullptr);
}

}  // namespace moebench
