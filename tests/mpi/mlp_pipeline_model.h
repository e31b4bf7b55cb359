// The model of residual MLP blocks that the pipeline engine's tests split into stages, one block
// or more per rank at 1, 2 and 4 ranks.
#pragma once

namespace moebench::mlp_pipeline_model {
inline constexpr int kLayers = 4, kHidden = 8, kFfn = 12, kRows = 3;
}  // namespace moebench::mlp_pipeline_model
