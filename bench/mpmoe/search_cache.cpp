#include "bench/mpmoe/search_cache.h"
#include <chrono>
#include <libfccp/csv.h>
#include <cmath>
#include <filesystem>

namespace moebench::mpmoe {
namespace {

std::vector<std::string> search_key(const BenchContext& ctx, const LayerShape& s) {
  return {backend_name(ctx.backend()), ctx.device.info().name, std::to_string(ctx.world.size()), ctx.world.link(),
          s.model, std::to_string(s.moe.hidden), std::to_string(s.moe.ffn), std::to_string(s.moe.experts),
          std::to_string(s.moe.top_k), ctx.opts.dtype};
}

const std::vector<std::string>& search_columns() {
  static const std::vector<std::string> cols = {"search_backend", "search_device", "search_ranks", "search_link", "model",
                                                "hidden", "ffn", "experts", "top_k", "search_dtype", "strategy", "kind",
                                                "n", "b_floor", "b_ceil"};
  return cols;
}
// The saved search's rows (its own columns; the provenance after them is not read). Throws
// on a file that is not one.
std::vector<std::vector<std::string>> read_search_file(const std::string& path) {
  const auto& c = search_columns();
  io::CSVReader<15, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(path);
  in.read_header(io::ignore_extra_column, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12],
                 c[13], c[14]);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> v(15);
  while (in.read_row(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14]))
    rows.push_back(v);
  return rows;
}

}  // namespace

std::optional<std::string> SearchCache::load(const BenchContext& ctx, const std::vector<LayerShape>& shapes) {
  searches_.clear();
  loaded_.clear();
  if (fresh_ || !std::filesystem::exists(path_)) return std::nullopt;
  std::map<std::pair<std::string, std::string>, std::vector<GranularitySearch::Row>> rows;
  try {
    for (const auto& v : read_search_file(path_))
      for (const auto& s : shapes)
        if (std::vector<std::string>(v.begin(), v.begin() + 10) == search_key(ctx, s)) {
          GranularitySearch::Row row{v[11], std::stoi(v[12]), 0, 0, 0};
          if (row.kind == "range") {
            row.floor = std::stod(v[13]);
            row.ceil = std::stod(v[14]);
          } else {
            row.b = std::stoi(v[13]);
          }
          rows[{v[4], v[10]}].push_back(row);
        }
  } catch (const std::exception& e) {
    return "--search-file: cannot read " + path_ + ": " + e.what() + " (use --fresh-search to start over)";
  }
  for (auto& [key, r] : rows) {
    GranularitySearch g;
    if (auto e = g.load(r)) return "--search-file: " + path_ + ": " + *e;
    searches_[key] = g;
    loaded_.insert(key);
  }
  return std::nullopt;
}

void SearchCache::save(const BenchContext& ctx, const std::vector<LayerShape>& shapes) const {
  // The key columns are the search's own (the provenance columns after them are the run's
  // that last wrote the file).
  CsvTable t(search_columns());
  // Other layers' and machines' searches in the file stay; an unreadable file is replaced.
  if (std::filesystem::exists(path_)) {
    try {
      for (const auto& v : read_search_file(path_)) {
        bool mine = false;
        for (const auto& s : shapes) mine = mine || std::vector<std::string>(v.begin(), v.begin() + 10) == search_key(ctx, s);
        if (!mine) t.add_row(v);
      }
    } catch (const std::exception&) {
    }
  }
  for (const auto& s : shapes)
    for (const auto& [key, g] : searches_) {
      if (key.first != s.model) continue;
      for (const auto& row : g.rows()) {
        std::vector<std::string> v = search_key(ctx, s);
        v.push_back(key.second);
        v.push_back(row.kind);
        v.push_back(std::to_string(row.n));
        if (row.kind == "range") {
          for (double b : {row.floor, row.ceil}) v.push_back(std::isinf(b) ? "inf" : fmt(b, 12));
        } else {
          v.push_back(std::to_string(row.b));
          v.push_back("");
        }
        t.add_row(v);
      }
    }
  t.write(path_, ctx.provenance);
}

// MPMoE-pb: Algorithm 1 per strategy, then the best of the strategies' picks.
void search_pb(const Runtime& rt, SearchCache& searches, CaseResult& c, LayerRunner& r) {
  const auto start = std::chrono::steady_clock::now();
  for (MemoryReuse s : kStrategies) {
    GranularitySearch& g = searches.search(c.model, reuse_name(s));
    const int before = g.stats().profiled_points;
    const int n = g.best(c.tokens, [&](int parts) { return r.profile(tokens_split(parts, s)); });
    c.pb_points += g.stats().profiled_points - before;
    c.pb_saved = c.pb_saved || (g.stats().profiled_points == before && searches.loaded(c.model, reuse_name(s)));
    c.pb_n[s] = n;
    const auto it = g.last_profile().find(n);
    c.pb_ms[s] = it != g.last_profile().end() ? it->second : r.profile(tokens_split(n, s));
  }
  MemoryReuse best = kStrategies.front();
  for (MemoryReuse s : kStrategies)
    if (c.pb_ms[s] < c.pb_ms[best]) best = s;
  c.pb = tokens_split(c.pb_n[best], best);
  c.pb_search_ms = rt.max(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace moebench::mpmoe
