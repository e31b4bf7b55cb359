// The one timing step every measurement uses: `work` between two events on a stream (work on
// other streams joins it before its end), the device synchronized, the slowest rank's
// milliseconds (every rank gets the same number). The benches' harness and the library code that
// measures (the MPMoE runner and calibration) both time through it.
#pragma once
#include "runtime/device.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"

namespace moebench {

class Communicator;  // comm/comm.h, a floor above: the slowest rank is the Runtime's to find

// What code that measures stands on: the runtime (the slowest rank), the device, the world.
struct MeasureEnv {
  const Runtime& rt;
  Device& device;
  Communicator& world;
};

template <class F>
double slowest_rank_ms(const Runtime& rt, Device& dev, const Stream& s, F&& work) {
  Event start(dev.backend(), EventUse::timing), stop(dev.backend(), EventUse::timing);
  start.record(s);
  work();
  stop.record(s);
  dev.synchronize();
  stop.synchronize();
  return rt.max(Event::elapsed_ms(start, stop));
}

}  // namespace moebench
