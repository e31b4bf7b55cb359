#include "moe/dispatcher_table.h"
#include "kernels/exec.h"

namespace moebench {

int DispatcherRow::expert_ranks(int world, int tp) const {
  switch (experts_over) {
    case ExpertsOver::each_rank: return 1;
    case ExpertsOver::world: return world;
    case ExpertsOver::tp_group: return tp;
  }
  return 1;
}

namespace {
std::vector<DispatcherRow>& dispatcher_rows_table() {
  static std::vector<DispatcherRow> table = {
      {"local", ExpertsOver::each_rank, false, "every expert on every rank: the one-device layer",
       [](const DispatcherEnv& env, Communicator*) { return make_local_dispatcher(env); }},
      {"expert_parallel", ExpertsOver::world, true,
       "DPMoE / FastMoE: the experts over the ranks, the tokens exchanged with all-to-all-v",
       [](const DispatcherEnv& env, Communicator* group) { return make_expert_parallel_dispatcher(env, *group); }},
      {"ppmoe", ExpertsOver::tp_group, false,
       "PPMoE (000 Algorithm 1): the experts over the TP group by index selection, the outputs all-reduced",
       [](const DispatcherEnv& env, Communicator* group) { return make_ppmoe_dispatcher(env, *group); }},
  };
  return table;
}
}  // namespace

const std::vector<DispatcherRow>& dispatcher_table() { return dispatcher_rows_table(); }

std::vector<std::string> dispatcher_names() {
  std::vector<std::string> out;
  for (const DispatcherRow& r : dispatcher_table()) out.push_back(r.name);
  return out;
}

std::string dispatcher_list(bool (*keep)(const DispatcherRow&)) {
  std::string out;
  for (const DispatcherRow& r : dispatcher_table())
    if (!keep || keep(r)) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

std::optional<std::string> pick_dispatchers(std::vector<std::string>& names, bool segmented) {
  auto keeps_counts_on_device = [](const DispatcherRow& r) { return !r.needs_host_counts; };
  if (names.empty())
    for (const DispatcherRow& r : dispatcher_table())
      if (!segmented || keeps_counts_on_device(r)) names.push_back(r.name);
  for (const std::string& d : names)
    if (segmented && dispatcher_row(d).needs_host_counts)
      return "--dispatchers: " + d + " sizes its exchange from row counts on the host, and --expert-gemm "
             "segmented keeps them on the device; allowed with it: " + dispatcher_list(keeps_counts_on_device);
  return std::nullopt;
}

const DispatcherRow& dispatcher_row(const std::string& name) {
  for (const DispatcherRow& r : dispatcher_table())
    if (r.name == name) return r;
  throw Error("no dispatcher '" + name + "'; there are: " + dispatcher_list());
}

DispatcherRegistration::DispatcherRegistration(const DispatcherRow& row) : name_(row.name) {
  for (const DispatcherRow& r : dispatcher_rows_table())
    if (name_ == r.name) throw Error("a dispatcher '" + name_ + "' is already in the table");
  dispatcher_rows_table().push_back(row);
}

DispatcherRegistration::~DispatcherRegistration() {
  std::erase_if(dispatcher_rows_table(), [&](const DispatcherRow& r) { return name_ == r.name; });
}

}  // namespace moebench
