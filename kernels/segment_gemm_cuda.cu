// The segment GEMMs on the tensor cores (WMMA 16x16x16, fp32 accumulators). One block computes a
// 128 x 128 tile of C with 8 warps of 64 x 32, stepping K by 32 through shared memory; each step's
// next tiles are read into registers while the tensor cores work on the current ones.
// rows form: grid.x walks every segment's row tiles -- at most ceil(bound / 128) + segments of
// them, so the host sizes the launch without the counts -- and each block finds its segment with
// one warp scanning the device offsets; grid.y is C's column tiles. weights form: grid.y is the
// segment, grid.x the tiles of C_e, and K runs over the segment's rows. Each form (and the rows
// form with B_e read as [n, k]) is its own instantiation: ptxas gives the bf16 rows forms 162-168
// registers and the weights form 122 (two blocks per SM), where one kernel for all took 224.
// Operands move as 16-byte vectors; a vector past a bound is read as zeros. The epilogue goes
// through a per-warp 16 x 16 fp32 staging tile, so it sees the unrounded product.
#include <mma.h>
#include <algorithm>
#include <type_traits>
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gelu_math.h"
#include "kernels/segment_gemm.h"

namespace moebench {
namespace {

using namespace nvcuda;

constexpr int kTileM = 128, kTileN = 128, kTileK = 32, kPad = 8, kWarps = 8, kTileThreads = kWarps * 32;
constexpr int kWarpM = 64, kWarpN = 32;  // warps in a 2 x 4 grid
constexpr int kFragM = kWarpM / 16, kFragN = kWarpN / 16;
constexpr int kVec = 8;  // 16-bit elements in 16 bytes

struct Params {  // the form and trans_b are the kernel's template arguments
  int segments;
  const std::int32_t* offset;
  long long bound;
  int m, n, k;
  float beta;
  const void* a;
  const void* b;
  void* c;
  long long stride_b, stride_c;
  int epilogue;  // Epilogue
  void* aux;
};

__device__ __forceinline__ long long clamp_bound(long long v, long long bound) { return v < 0 ? 0 : (v > bound ? bound : v); }

// A 16-byte vector of `src` (8 elements from `col`), or zeros when the row or the vector is out.
template <class T>
__device__ __forceinline__ uint4 load_vec(const T* src, long long row, bool row_in, int col, int width, int ld) {
  if (!row_in || col >= width) return make_uint4(0, 0, 0, 0);
  return *reinterpret_cast<const uint4*>(src + row * (long long)ld + col);
}

template <class T>
__device__ __forceinline__ void store_vec(T* dst, const uint4& v) { *reinterpret_cast<uint4*>(dst) = v; }

// Which segment and first row this rows-form block computes, or false when it has none: one warp
// counts each segment's row tiles and scans them, 32 segments at a time.
__device__ bool find_row_tile(const Params& p, int slot, int* segment, long long* first_row, long long* end_row) {
  __shared__ long long s_first, s_end;
  __shared__ int s_found, s_segment;
  if (threadIdx.x == 0) s_found = 0;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int before = 0;  // tiles of the segments already scanned
    for (int base = 0; base < p.segments; base += 32) {
      const int e = base + lane;
      long long lo = 0, hi = 0;
      if (e < p.segments) {
        hi = clamp_bound(p.offset[e + 1], p.bound);
        lo = clamp_bound(p.offset[e], hi);
      }
      const int tiles = int((hi - lo + kTileM - 1) / kTileM);
      int inclusive = tiles;
      for (int d = 1; d < 32; d <<= 1) {
        const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += up;
      }
      const int start = before + inclusive - tiles;
      if (e < p.segments && slot >= start && slot < start + tiles) {
        s_first = lo + (long long)(slot - start) * kTileM;
        s_end = hi;
        s_segment = e;
        s_found = 1;
      }
      before += __shfl_sync(0xffffffffu, inclusive, 31);
      if (before > slot) break;  // uniform over the warp
    }
  }
  __syncthreads();
  *segment = s_segment;
  *first_row = s_first;
  *end_row = s_end;
  return s_found != 0;
}

template <class T>
__device__ __forceinline__ float widen(T v) { return cuda::load(&v, 0); }

// kWeights: the weights form; kTransB: the rows form's B_e read as [n, k]. Compile-time, so that
// each instantiation holds one form's fragments and addressing only.
template <class T, bool kWeights, bool kTransB>
__global__ void __launch_bounds__(kTileThreads) segment_gemm_kernel(Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // 16-bit WMMA with bf16 needs sm_80; the host refuses older devices first
#else
  // A tile: rows form [128][32 + pad] row-major; weights form A^T kept as [32][128 + pad], i.e.
  // op(A) column-major. B tile: [32][128 + pad] row-major, or with trans_b [128][32 + pad], i.e.
  // op(B) column-major.
  constexpr int kALd = kTileK + kPad, kATLd = kTileM + kPad, kBLd = kTileN + kPad, kBTLd = kTileK + kPad;
  constexpr int kAElems = kTileM * kALd > kTileK * kATLd ? kTileM * kALd : kTileK * kATLd;
  constexpr int kBElems = kTileK * kBLd > kTileN * kBTLd ? kTileK * kBLd : kTileN * kBTLd;
  __shared__ __align__(128) T s_a[kAElems];
  __shared__ __align__(128) T s_b[kBElems];
  __shared__ __align__(128) float s_stage[kWarps][16 * 16];

  constexpr bool weights = kWeights;
  long long first_row = 0, end_row = 0;  // the segment rows this block reads
  int m0 = 0, n0 = 0, e = 0;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  T* c = static_cast<T*>(p.c);
  int K, M;
  if constexpr (!weights) {
    if (!find_row_tile(p, blockIdx.x, &e, &first_row, &end_row)) return;
    n0 = blockIdx.y * kTileN;
    K = p.k;
    M = 0;  // rows are bounded by end_row
    b += e * p.stride_b;
  } else {
    e = blockIdx.y;
    const int tiles_m = (p.m + kTileM - 1) / kTileM;
    m0 = (blockIdx.x % tiles_m) * kTileM;
    n0 = (blockIdx.x / tiles_m) * kTileN;
    end_row = clamp_bound(p.offset[e + 1], p.bound);
    first_row = clamp_bound(p.offset[e], end_row);
    K = int(end_row - first_row);
    M = p.m;
    c += e * p.stride_c;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / (kTileN / kWarpN)) * kWarpM, wn = (warp % (kTileN / kWarpN)) * kWarpN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragM][kFragN];
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  // Vector v of a step's A tile and of its B tile: where it goes in shared memory, and its value
  // (zeros past a bound). 512 of each per step, two per thread.
  auto a_vec = [&](int v, int k0, int* slot) {
    if constexpr (!weights) {  // A [rows, k]: tile row v / 4, columns (v % 4) * 8
      const int r = v / (kTileK / kVec), col = (v % (kTileK / kVec)) * kVec;
      const long long row = first_row + r;
      *slot = r * kALd + col;
      return load_vec(a, row, row < end_row, k0 + col, K, p.k);
    } else {  // A [rows, m] read as A^T: segment row k0 + v / 16, columns m0 + (v % 16) * 8
      const int r = v / (kTileM / kVec), col = (v % (kTileM / kVec)) * kVec;
      const long long row = first_row + k0 + r;
      *slot = r * kATLd + col;
      return load_vec(a, row, row < end_row, m0 + col, p.m, p.m);
    }
  };
  auto b_vec = [&](int v, int k0, int* slot) {
    if constexpr (weights) {  // B [rows, n]: segment row k0 + v / 16
      const int r = v / (kTileN / kVec), col = (v % (kTileN / kVec)) * kVec;
      const long long row = first_row + k0 + r;
      *slot = r * kBLd + col;
      return load_vec(b, row, row < end_row, n0 + col, p.n, p.n);
    } else if constexpr (!kTransB) {  // B_e [k, n]
      const int r = v / (kTileN / kVec), col = (v % (kTileN / kVec)) * kVec;
      *slot = r * kBLd + col;
      return load_vec(b, (long long)k0 + r, k0 + r < K, n0 + col, p.n, p.n);
    } else {  // B_e [n, k]: tile row j = v / 4 is C's column n0 + j
      const int j = v / (kTileK / kVec), col = (v % (kTileK / kVec)) * kVec;
      *slot = j * kBTLd + col;
      return load_vec(b, (long long)n0 + j, n0 + j < p.n, k0 + col, K, p.k);
    }
  };
  static_assert(kTileM * kTileK / kVec == 2 * kTileThreads && kTileK * kTileN / kVec == 2 * kTileThreads);
  // The next step's vectors are read into registers while the tensor cores work on this one's.
  uint4 next_a[2], next_b[2];
  int slot_a[2], slot_b[2];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      next_a[i] = a_vec(threadIdx.x + i * kTileThreads, k0, &slot_a[i]);
      next_b[i] = b_vec(threadIdx.x + i * kTileThreads, k0, &slot_b[i]);
    }
  };
  if (K > 0) fetch(0);
  for (int k0 = 0; k0 < K; k0 += kTileK) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      store_vec(s_a + slot_a[i], next_a[i]);
      store_vec(s_b + slot_b[i], next_b[i]);
    }
    __syncthreads();
    if (k0 + kTileK < K) fetch(k0 + kTileK);
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      // op(B) column-major with trans_b (rows form), row-major otherwise; op(A) column-major in
      // the weights form (A^T), row-major in the rows form.
      constexpr bool b_is_col = !weights && kTransB;
      using BLayout = std::conditional_t<b_is_col, wmma::col_major, wmma::row_major>;
      using ALayout = std::conditional_t<weights, wmma::col_major, wmma::row_major>;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> b_frag[kFragN];
#pragma unroll
      for (int j = 0; j < kFragN; ++j) {
        if constexpr (b_is_col)
          wmma::load_matrix_sync(b_frag[j], s_b + (wn + j * 16) * kBTLd + kk, kBTLd);
        else
          wmma::load_matrix_sync(b_frag[j], s_b + kk * kBLd + wn + j * 16, kBLd);
      }
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout> a_frag;
        if constexpr (weights)
          wmma::load_matrix_sync(a_frag, s_a + kk * kATLd + wm + i * 16, kATLd);
        else
          wmma::load_matrix_sync(a_frag, s_a + (wm + i * 16) * kALd + kk, kALd);
#pragma unroll
        for (int j = 0; j < kFragN; ++j) wmma::mma_sync(acc[i][j], a_frag, b_frag[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

  // Epilogue: each fragment through the warp's staging tile; lane l writes row l / 2, columns
  // (l % 2) * 8 .. + 8 of it as one vector.
  float* stage = s_stage[warp];
  T* aux = static_cast<T*>(p.aux);
  const int r = lane / 2, c8 = (lane % 2) * kVec;
#pragma unroll
  for (int i = 0; i < kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragN; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int col = n0 + wn + j * 16 + c8;
      bool in;
      long long row;
      if constexpr (weights) {
        row = m0 + wm + i * 16 + r;
        in = row < M && col < p.n;
      } else {
        row = first_row + wm + i * 16 + r;
        in = row < end_row && col < p.n;
      }
      if (in) {
        const long long at = row * p.n + col;
        float v[kVec];
#pragma unroll
        for (int q = 0; q < kVec; ++q) v[q] = stage[r * 16 + c8 + q];
        if (weights && p.beta != 0.f) {
          const uint4 old = *reinterpret_cast<const uint4*>(c + at);
          const T* o = reinterpret_cast<const T*>(&old);
#pragma unroll
          for (int q = 0; q < kVec; ++q) v[q] += p.beta * widen(o[q]);
        }
        uint4 out, kept;
        T* ov = reinterpret_cast<T*>(&out);
        T* kv = reinterpret_cast<T*>(&kept);
        if (p.epilogue == int(Epilogue::gelu_aux)) {
#pragma unroll
          for (int q = 0; q < kVec; ++q) {
            cuda::store(kv, q, v[q]);
            cuda::store(ov, q, gelu_math::forward(v[q]));
          }
          store_vec(aux + at, kept);
        } else if (p.epilogue == int(Epilogue::dgelu)) {
          const uint4 x = *reinterpret_cast<const uint4*>(aux + at);
          const T* xv = reinterpret_cast<const T*>(&x);
#pragma unroll
          for (int q = 0; q < kVec; ++q) cuda::store(ov, q, v[q] * gelu_math::derivative(widen(xv[q])));
        } else {
#pragma unroll
          for (int q = 0; q < kVec; ++q) cuda::store(ov, q, v[q]);
        }
        store_vec(c + at, out);
      }
      __syncwarp();
    }
  }
#endif
}

}  // namespace

void segment_gemm_cuda(const SegmentGemmArgs& g, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  int device = 0, major = 0;
  MOEBENCH_CUDA_CHECK(cudaGetDevice(&device));
  MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) throw Error("segment_gemm: its 16-bit tensor-core tiles need compute capability 8.0 or newer");
  Params p{g.segments, g.offset, (long long)g.bound, g.m, g.n, g.k, g.beta, g.a, g.b, g.c, g.stride_b, g.stride_c,
           int(g.epilogue), g.aux};
  dim3 grid;
  if (g.form == SegmentForm::rows) {
    const long long slots = ((long long)g.bound + kTileM - 1) / kTileM + g.segments;
    if (slots == 0) return;
    grid = dim3(unsigned(slots), unsigned((g.n + kTileN - 1) / kTileN));
  } else {
    const long long tiles = (long long)((g.m + kTileM - 1) / kTileM) * ((g.n + kTileN - 1) / kTileN);
    grid = dim3(unsigned(tiles), unsigned(g.segments));
  }
  if (grid.y > 65535u) throw Error("segment_gemm: " + std::to_string(grid.y) + " column tiles or segments; at most 65535");
  cuda::dispatch_float(g.dtype, "segment_gemm", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      throw Error("segment_gemm: fp32 operands have no tensor-core path here");
    } else {
      if (g.form == SegmentForm::weights)
        segment_gemm_kernel<T, true, false><<<grid, kTileThreads, 0, s>>>(p);
      else if (g.trans_b)
        segment_gemm_kernel<T, false, true><<<grid, kTileThreads, 0, s>>>(p);
      else
        segment_gemm_kernel<T, false, false><<<grid, kTileThreads, 0, s>>>(p);
      MOEBENCH_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace moebench
