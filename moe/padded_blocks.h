// The padded route's block height (--expert-gemm padded, kernels/pad_rows.h). Blocks as tall as
// the busiest expert make the batched GEMMs compute experts x busiest rows: under skew (one expert
// with 19 times the mean, say) that is most of the layer's work, all of it padding. So the height
// is the one that costs least, counting each block's rows (padding included) and, for each expert
// too busy for its block, its rows plus a fixed cost for its own GEMMs, every row count rounded up
// to the GEMMs' row tile: on a balanced routing, the busiest expert's rows; under skew, a height
// near the others' with the hot experts in the overflow.
#pragma once
#include <vector>
#include "moe/config.h"

namespace moebench {

// rows: per expert. Among the heights that fit some expert exactly (none fits better between two),
// the cheapest, the tallest of equals (fewer experts apart); never 0 unless no expert has rows.
int padded_block_rows(const std::vector<int>& rows, const PaddedBlockCost& cost);

}  // namespace moebench
