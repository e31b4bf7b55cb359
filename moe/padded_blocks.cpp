#include "moe/padded_blocks.h"
#include <algorithm>
#include <functional>

namespace moebench {

int padded_block_rows(const std::vector<int>& rows, const PaddedBlockCost& cost) {
  const long long tile = std::max(1, cost.row_tile);
  const auto tiled = [tile](long long n) { return (n + tile - 1) / tile * tile; };
  std::vector<int> sorted = rows;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const long long E = (long long)sorted.size();
  long long best_cost = -1, apart = 0;  // apart: the overflow's cost, every expert above the height
  int best = 0;
  for (long long i = 0; i < E;) {
    const int height = sorted[i];
    if (height == 0 && i > 0) break;  // blocks of no rows would read as packed rows (Experts::forward)
    const long long total = E * tiled(height) + apart;
    if (best_cost < 0 || total < best_cost) best_cost = total, best = height;
    for (; i < E && sorted[i] == height; ++i) apart += tiled(sorted[i]) + cost.overflow_rows;
  }
  // The top of its tile, which costs the same: the experts below it fit too, and the GEMMs' shapes
  // repeat as routing moves the rows within a tile, so they keep their cuBLASLt plans.
  return int(tiled(best));
}

}  // namespace moebench
