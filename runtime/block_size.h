// The sizes of the pool's blocks (runtime/allocator.h). A request is rounded up to a size class
// so that requests which grow a little every step -- an MoE layer's routed rows as its gate
// trains -- land in a block they took before instead of a new one each step: under exact sizes
// every step took new blocks from the system (the pool grew without bound and each new block's
// pages were faulted in again), as a caching allocator without size classes does.
#pragma once
#include <cstddef>

namespace moebench {

// Up to kFineBlockLimit, blocks are whole multiples of kBlockAlignment (vector loads on both
// backends). Above it, each doubling of size is split into kClassesPerDoubling steps: a request
// is rounded up to the next step, so a block holds at most 1 / kClassesPerDoubling more than
// asked for.
inline constexpr std::size_t kBlockAlignment = 512;
inline constexpr std::size_t kFineBlockLimit = std::size_t(1) << 20;
inline constexpr int kClassesPerDoubling = 8;

// The block size that serves a request of `bytes` (0 for 0).
std::size_t pool_block_size(std::size_t bytes);

}  // namespace moebench
