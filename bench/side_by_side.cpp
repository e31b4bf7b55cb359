#include "bench/side_by_side.h"
#include <algorithm>
#include <cmath>

namespace moebench {

double SideBySide::alone(BenchContext& ctx, int y, int times) const {
  Event a(ctx.backend()), b(ctx.backend());
  a.record(streams[y]);
  launch[y](times);
  b.record(streams[y]);
  ctx.device.synchronize();
  if (drain) drain();
  return ctx.rt.max(Event::elapsed_ms(a, b));
}

double SideBySide::beside(BenchContext& ctx, int y, const std::vector<int>& others,
                          const std::vector<double>& alone_ms) const {
  for (int x : others)  // enough repeats to outlast y
    launch[x](int(std::ceil(1.5 * alone_ms[y] / std::max(alone_ms[x], 1e-3))) + 1);
  Event a(ctx.backend()), b(ctx.backend());
  a.record(streams[y]);
  launch[y](1);
  b.record(streams[y]);
  ctx.device.synchronize();
  if (drain) drain();
  return ctx.rt.max(Event::elapsed_ms(a, b));
}

}  // namespace moebench
