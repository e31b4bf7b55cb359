// Algorithm 1's saved searches (moebench_mpmoe --search-file): what a search learned for a layer
// on a machine, read back by later runs on the same backend, device, ranks, link, layer and
// dtype (unless --fresh-search), and written back with the other layers' and machines' kept.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include "harness/bench.h"
#include "moe/granularity_search.h"
#include "bench/mpmoe/cases.h"
#include "harness/layer_runner.h"

namespace moebench::mpmoe {

class SearchCache {
 public:
  SearchCache() = default;
  SearchCache(std::string path, bool fresh) : path_(std::move(path)), fresh_(fresh) {}
  const std::string& path() const { return path_; }
  // The saved searches of `shapes` on this machine; an error naming --search-file.
  std::optional<std::string> load(const BenchContext& ctx, const std::vector<LayerShape>& shapes);
  void save(const BenchContext& ctx, const std::vector<LayerShape>& shapes) const;
  // The search of (model, strategy), empty where none was saved.
  GranularitySearch& search(const std::string& model, const std::string& strategy) { return searches_[{model, strategy}]; }
  bool loaded(const std::string& model, const std::string& strategy) const { return loaded_.count({model, strategy}) > 0; }

 private:
  std::string path_;
  bool fresh_ = false;
  std::map<std::pair<std::string, std::string>, GranularitySearch> searches_;  // (model, strategy)
  std::set<std::pair<std::string, std::string>> loaded_;
};

// MPMoE-pb: Algorithm 1 per strategy (each from its saved search where there is one), then the
// best of the strategies' picks, into the case (pb, pb_n, pb_ms, and what the search cost).
void search_pb(const Runtime& rt, SearchCache& searches, CaseResult& c, LayerRunner& r);

}  // namespace moebench::mpmoe
