// An operation timed alone and beside others on their own streams (MPMoE Sec. 2.3: alpha(y, x)
// = time of y alone / time of y while x runs), for the slowdown bench and the performance
// model's calibration. Times are the slowest rank's, so every rank gets the same factors.
#pragma once
#include <functional>
#include <vector>
#include "runtime/device.h"
#include "runtime/runtime.h"

namespace moebench {

struct SideBySide {
  // launch[i](times) enqueues operation i `times` times on streams[i]; drain() completes what
  // the communicators have queued (after the device is synchronized).
  std::vector<std::function<void(int)>> launch;
  std::vector<Stream> streams;
  std::function<void()> drain;

  // Milliseconds of `times` runs of operation y, alone.
  double alone(const Runtime& rt, Device& dev, int y, int times = 1) const;
  // Milliseconds of one run of y while each of `others` runs again and again on its stream,
  // enough times to outlast y (from the ops' times alone, `alone_ms`).
  double beside(const Runtime& rt, Device& dev, int y, const std::vector<int>& others,
                const std::vector<double>& alone_ms) const;
};

}  // namespace moebench
