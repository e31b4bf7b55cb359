#include "runtime/side_by_side.h"
#include <algorithm>
#include <cmath>
#include "runtime/timing.h"

namespace moebench {

double SideBySide::alone(const Runtime& rt, Device& dev, int y, int times) const {
  const double ms = slowest_rank_ms(rt, dev, streams[y], [&] { launch[y](times); });
  if (drain) drain();
  return ms;
}

double SideBySide::beside(const Runtime& rt, Device& dev, int y, const std::vector<int>& others,
                          const std::vector<double>& alone_ms) const {
  for (int x : others)  // enough repeats to outlast y
    launch[x](int(std::ceil(1.5 * alone_ms[y] / std::max(alone_ms[x], 1e-3))) + 1);
  const double ms = slowest_rank_ms(rt, dev, streams[y], [&] { launch[y](1); });
  if (drain) drain();
  return ms;
}

}  // namespace moebench
