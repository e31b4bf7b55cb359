// The padded route's block height (--expert-gemm padded, kernels/pad_rows.h). Blocks as tall as
// the busiest expert make the batched GEMMs compute experts x busiest rows: under skew (one expert
// with 19 times the mean, say) that is most of the layer's work, all of it padding. So the height
// is the one that costs least, counting each block's rows (padding included) and, for each expert
// too busy for its block, its rows plus a fixed cost for its own GEMMs, every row count rounded up
// to the GEMMs' row tile: on a balanced routing, the busiest expert's rows; under skew, a height
// near the others' with the hot experts in the overflow. The height is the top of its row tile: a
// height a routing has not met before is a new GEMM shape, and on CUDA each new shape costs the
// host a cuBLASLt plan (kernels/batched_gemm_cuda.cu) in the step that meets it -- a training
// step whose routing moves every step would otherwise meet one in every MoE layer.
#pragma once
#include <vector>
#include "moe/config.h"

namespace moebench {

// rows: per expert. Among the heights that fit some expert exactly (none fits better between two),
// the cheapest, the tallest of equals (fewer experts apart), rounded up to cost.row_tile; never 0
// unless no expert has rows.
int padded_block_rows(const std::vector<int>& rows, const PaddedBlockCost& cost);

}  // namespace moebench
