#include "tools/claims/ledger.h"
#include "tools/claims/node_setting.h"
#include "tools/claims/between_runs.h"
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
// `between_runs`: the spread its class's numbers move by between two runs of this machine's.
SettingResult evaluate_setting(const ClaimSpec& spec, double paper, const std::string& expression, const std::string& root,
                               const std::string& paper_hardware, bool absolute, bool measured = true,
                               double between_runs = 0) {
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
  // The between-run spread is this machine's, which the stability pair measured; a GPU run's
  // range is its own.
  const bool cpu = std::find(backends.begin(), backends.end(), "cpu") != backends.end();
  const Judgement j = judge_number(spec, paper, *s.value, measured && cpu ? between_runs : 0);
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
  BetweenRuns spreads;
  if (std::ifstream(results + "/claims_stability.csv")) spreads = between_runs(CsvRows::read(results + "/claims_stability.csv"), specs);
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
    c.local = evaluate_setting(spec, c.paper, spec.local, results, spec.hardware, absolute, true,
                               between_run_spread(spreads, spec));
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
