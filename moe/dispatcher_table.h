// The MoE layer's dispatchers as a table, one row each: its name, the ranks its experts split over
// (and whether those ranks hold the same tokens), whether it needs the routing's row counts on the
// host whatever the expert GEMM, and its factory. The programs build their choices, defaults and
// checks from it, and compare no dispatcher's name: a new dispatcher is its file, its row here and
// its tests.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "moe/dispatcher.h"

namespace moebench {

// Where a dispatcher's experts live.
enum class ExpertsOver {
  each_rank,  // every rank holds every expert, and its own tokens (the one-device layer)
  world,      // split over every rank; each rank has its own tokens
  tp_group,   // split over a tensor-parallel group, whose ranks hold the same tokens
};

struct DispatcherRow {
  const char* name;
  ExpertsOver experts_over;
  // Sizes its exchange from row counts on the host whatever the expert GEMM, so it cannot run with
  // --expert-gemm segmented, which keeps them on the device.
  bool needs_host_counts;
  const char* what;  // one line: what it does, after whom
  // `group`: the ranks its experts split over (the world, or this rank's TP group); unused for
  // each_rank.
  std::unique_ptr<TokenDispatcher> (*make)(const DispatcherEnv& env, Communicator* group);

  // How many ranks its experts split over, of `world` ranks in tensor-parallel groups of `tp`.
  int expert_ranks(int world, int tp) const;
  bool one_device() const { return experts_over == ExpertsOver::each_rank; }
  bool shares_tokens() const { return experts_over == ExpertsOver::tp_group; }
};

const std::vector<DispatcherRow>& dispatcher_table();
std::vector<std::string> dispatcher_names();
// The names of the rows `keep` holds (every row without it), comma-separated: "local, ppmoe".
std::string dispatcher_list(bool (*keep)(const DispatcherRow&) = nullptr);
// The dispatchers a run takes: `names` as listed, or where it is empty every row -- with the expert
// GEMM `segmented`, which keeps the row counts on the device, every row that does not need them on
// the host. A listed one that needs them under segmented: why, naming --dispatchers.
std::optional<std::string> pick_dispatchers(std::vector<std::string>& names, bool segmented);
// Throws Error naming the dispatchers there are.
const DispatcherRow& dispatcher_row(const std::string& name);

// A row added for as long as this lives: a dispatcher outside moe/ (a test's, or a program's own)
// joins every choice, default and check the table feeds. Throws Error for a name already there.
class DispatcherRegistration {
 public:
  explicit DispatcherRegistration(const DispatcherRow& row);
  ~DispatcherRegistration();
  DispatcherRegistration(const DispatcherRegistration&) = delete;
  DispatcherRegistration& operator=(const DispatcherRegistration&) = delete;

 private:
  std::string name_;
};

}  // namespace moebench
