#include <algorithm>
#include <cstdint>
#include "kernels/cuda_check.cuh"
#include "kernels/pad_rows.h"

namespace moebench {

// A chunk of experts' first packed rows, passed by value (copied at launch: no host array has
// to outlive the call); 256 experts per launch keep the parameter (2 KiB) under the 4 KiB that
// every toolkit and architecture takes.
constexpr int kExpertsPerLaunch = 256;
struct ExpertChunk {
  long long first_row[kExpertsPerLaunch + 1];  // packed rows of the chunk's experts, and the end
  int first_expert, count;
};

// One block per block row of the chunk: a row of the expert's copies across (to_padded,
// to_packed), a padding row is zeroed (to_padded, zero_padding) or skipped. The block of an
// expert in the overflow is all padding; its rows move in one copy (pad_rows_cuda).
template <class Unit>
__global__ void pad_rows_kernel(ExpertChunk chunk, int padded, size_t row_units, Unit* packed, Unit* padded_rows,
                                PadMove move) {
  const long long r = blockIdx.x;
  const int e = int(r / padded), p = int(r % padded);
  long long rows = chunk.first_row[e + 1] - chunk.first_row[e];
  if (rows > padded) rows = 0;
  Unit* block_row = padded_rows + (size_t(chunk.first_expert + e) * padded + p) * row_units;
  if (p >= rows) {
    if (move == PadMove::to_packed) return;
    for (size_t i = threadIdx.x; i < row_units; i += blockDim.x) block_row[i] = Unit{};
    return;
  }
  if (move == PadMove::zero_padding) return;
  Unit* packed_row = packed + size_t(chunk.first_row[e] + p) * row_units;
  for (size_t i = threadIdx.x; i < row_units; i += blockDim.x) {
    if (move == PadMove::to_padded) block_row[i] = packed_row[i]; else packed_row[i] = block_row[i];
  }
}

// zero_padding: one block per padding row of the chunk, and none for the experts' rows (a
// dispatcher wrote them). pad_first: each expert's first padding row among the chunk's, and the end.
struct PaddingChunk {
  long long pad_first[kExpertsPerLaunch + 1];
  int first_expert, count;
};

template <class Unit>
__global__ void zero_padding_kernel(PaddingChunk chunk, int padded, size_t row_units, Unit* padded_rows) {
  const long long b = blockIdx.x;
  int lo = 0, hi = chunk.count - 1;  // the last expert whose padding starts at or before b
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunk.pad_first[mid] <= b) lo = mid; else hi = mid - 1;
  }
  const long long pad_rows = chunk.pad_first[lo + 1] - chunk.pad_first[lo];
  const long long p = padded - pad_rows + (b - chunk.pad_first[lo]);
  Unit* row = padded_rows + (size_t(chunk.first_expert + lo) * padded + p) * row_units;
  for (size_t i = threadIdx.x; i < row_units; i += blockDim.x) row[i] = Unit{};
}

template <class Unit>
static void launch(const RowPadding& p, void* packed, void* padded, PadMove move, cudaStream_t s) {
  const std::size_t row_units = std::size_t(p.width) * dtype_size(p.dtype) / sizeof(Unit);
  const unsigned threads = unsigned(std::min<std::size_t>(256, std::max<std::size_t>(32, (row_units + 31) / 32 * 32)));
  for (int first = 0; first < p.experts(); first += kExpertsPerLaunch) {
    if (move == PadMove::zero_padding) {
      PaddingChunk chunk{};
      chunk.first_expert = first;
      chunk.count = std::min(kExpertsPerLaunch, p.experts() - first);
      for (int i = 0; i < chunk.count; ++i)
        chunk.pad_first[i + 1] = chunk.pad_first[i] + (p.overflows(first + i) ? p.padded : p.padded - (long long)p.rows(first + i));
      if (chunk.pad_first[chunk.count] == 0) continue;
      zero_padding_kernel<Unit><<<unsigned(chunk.pad_first[chunk.count]), threads, 0, s>>>(chunk, p.padded, row_units,
                                                                                         static_cast<Unit*>(padded));
      MOEBENCH_CUDA_LAUNCH_CHECK();
      continue;
    }
    ExpertChunk chunk{};
    chunk.first_expert = first;
    chunk.count = std::min(kExpertsPerLaunch, p.experts() - first);
    for (int i = 0; i <= chunk.count; ++i) chunk.first_row[i] = (long long)p.offset[first + i];
    const long long blocks = (long long)chunk.count * p.padded;
    if (blocks == 0) continue;
    pad_rows_kernel<Unit><<<unsigned(blocks), threads, 0, s>>>(chunk, p.padded, row_units, static_cast<Unit*>(packed),
                                                               static_cast<Unit*>(padded), move);
    MOEBENCH_CUDA_LAUNCH_CHECK();
  }
}

void pad_rows_cuda(const RowPadding& p, const void* packed, void* padded, PadMove move, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const std::size_t row_bytes = std::size_t(p.width) * dtype_size(p.dtype);
  const auto aligned = [&](std::size_t unit) {  // a null packed (zero_padding) is aligned
    return row_bytes % unit == 0 && reinterpret_cast<std::uintptr_t>(packed) % unit == 0 &&
           reinterpret_cast<std::uintptr_t>(padded) % unit == 0;
  };
  void* pk = const_cast<void*>(packed);
  if (aligned(16)) launch<uint4>(p, pk, padded, move, s);
  else if (aligned(4)) launch<std::uint32_t>(p, pk, padded, move, s);
  else launch<std::uint16_t>(p, pk, padded, move, s);
  if (move == PadMove::zero_padding) return;
  // The overflow: each such expert's rows are one contiguous span on both sides.
  const std::vector<std::size_t> start = padded_starts(p.offset, p.padded);
  for (int e = 0; e < p.experts(); ++e) {
    if (!p.overflows(e)) continue;
    char* at = static_cast<char*>(padded) + start[e] * row_bytes;
    char* from = static_cast<char*>(pk) + p.offset[e] * row_bytes;
    const std::size_t bytes = p.rows(e) * row_bytes;
    if (move == PadMove::to_padded) MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(at, from, bytes, cudaMemcpyDeviceToDevice, s));
    else MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(from, at, bytes, cudaMemcpyDeviceToDevice, s));
  }
}

}  // namespace moebench
