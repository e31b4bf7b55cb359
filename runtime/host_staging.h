// Host arrays the device copies from inside a timed step (routing counts, row bases, bias
// rows). On CUDA they go through pinned memory owned by the object that uploads them, so the
// copy is a plain asynchronous DMA rather than the driver staging pageable memory on the
// host's time, and the vector the caller built may die right after. A ring of pinned slots,
// each reused only once the copy that last read it has completed (an event, normally long
// done), lets several micro-batches upload while earlier copies still wait in their streams.
// On the CPU an upload is a memcpy in stream order (the bytes are taken at the call). Pinned
// bytes are host memory, not counted as device tags.
#pragma once
#include <array>
#include <vector>
#include <cstddef>
#include "runtime/device.h"

namespace moebench {

class HostStaging {
 public:
  explicit HostStaging(const Device& dev);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // dst (device) <- src (host, `bytes`), ordered on `s`; src may be freed when this returns.
  void upload(void* dst, const void* src, std::size_t bytes, const Stream& s);

 private:
  struct Slot {
    void* pinned = nullptr;
    std::size_t capacity = 0;
    void* last_copy = nullptr;  // cudaEvent_t recorded after the copy that last read `pinned`
  };
  static constexpr int kSlots = 8;
  Backend backend_;
  std::array<Slot, kSlots> slots_{};
  int next_ = 0;
  std::vector<void*> retired_;  // outgrown pinned buffers, freed with the staging (cudaFreeHost waits for the device)
};

}  // namespace moebench
