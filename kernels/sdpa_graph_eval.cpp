// evaluate_sdpa_graph: an attention graph (kernels/sdpa_graph.h) run op by op on the CPU, each
// tensor read and written through its own dims and strides, as cuDNN reads them: a dimension of
// 1 broadcasts, a reduction reduces the dimensions its output has as 1, a reshape views its
// input's memory with other strides. A tensor declared 16-bit holds values rounded to that type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include "kernels/convert.h"
#include "kernels/exec.h"
#include "kernels/sdpa_graph.h"

namespace moebench {

namespace {

using Index = std::array<std::int64_t, 4>;

std::int64_t extent(const SdpaTensor& t) {
  std::int64_t e = 1;
  for (int i = 0; i < 4; ++i) e += (t.dims[i] - 1) * t.strides[i];
  return e;
}

std::int64_t offset(const SdpaTensor& t, const Index& at) {
  std::int64_t o = 0;
  for (int i = 0; i < 4; ++i) o += (t.dims[i] == 1 ? 0 : at[i]) * t.strides[i];
  return o;
}

// Whether no two elements of `t` share an address (dims of 1 aside, each stride at least the
// span of the smaller ones): a virtual tensor here is memory, so an overlap would corrupt it.
bool one_to_one(const SdpaTensor& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> by_stride;  // (stride, dim)
  for (int i = 0; i < 4; ++i)
    if (t.dims[i] > 1) by_stride.emplace_back(t.strides[i], t.dims[i]);
  std::sort(by_stride.begin(), by_stride.end());
  std::int64_t span = 1;
  for (const auto& [stride, dim] : by_stride) {
    if (stride < span) return false;
    span = stride * dim;
  }
  return true;
}

template <class F>
void for_each(const std::array<std::int64_t, 4>& dims, F&& f) {
  Index i{};
  for (i[0] = 0; i[0] < dims[0]; ++i[0])
    for (i[1] = 0; i[1] < dims[1]; ++i[1])
      for (i[2] = 0; i[2] < dims[2]; ++i[2])
        for (i[3] = 0; i[3] < dims[3]; ++i[3]) f(i);
}

float stored(SdpaType t, float v) {
  switch (t) {
    case SdpaType::f16: return round_to(DType::f16, v);
    case SdpaType::bf16: return round_to(DType::bf16, v);
    default: return v;
  }
}

class Evaluation {
 public:
  Evaluation(const SdpaGraph& g, const std::function<float*(int)>& bound) : g_(g), memory_(g.tensors.size()) {
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const SdpaTensor& t = g.tensors[i];
      if (t.by_value)
        memory_[i] = const_cast<float*>(&t.value);
      else if (t.is_virtual && !one_to_one(t))
        throw Error("sdpa graph: the virtual tensor " + t.name + "'s strides give two elements one address");
      else if (t.is_virtual)
        memory_[i] = owned_.emplace_back(std::size_t(extent(t))).data();
      else if (!(memory_[i] = bound(int(i))))
        throw Error("sdpa graph: no memory for " + t.name);
    }
  }

  void run(const SdpaOp& op) {
    switch (op.kind) {
      case SdpaOpKind::matmul: return matmul(op);
      case SdpaOpKind::pointwise: return pointwise(op);
      case SdpaOpKind::reduction: return reduction(op);
      case SdpaOpKind::reshape: return reshape(op);
    }
  }

 private:
  const SdpaTensor& t(int i) const { return g_.tensors[i]; }
  float read(int i, const Index& at) const { return memory_[i][offset(t(i), at)]; }
  void write(int i, const Index& at, float v) { memory_[i][offset(t(i), at)] = stored(t(i).type, v); }

  // y[.., m, n] = sum over k of x[.., m, k] b[.., k, n]; an accumulator (dQ's) is added to.
  void matmul(const SdpaOp& op) {
    const SdpaTensor &x = t(op.x), &y = t(op.y);
    const std::int64_t inner = x.dims[3];
    for_each(y.dims, [&](const Index& at) {
      double sum = 0;
      for (std::int64_t k = 0; k < inner; ++k)
        sum += double(read(op.x, {at[0], at[1], at[2], k})) * read(op.b, {at[0], at[1], k, at[3]});
      write(op.y, at, float(y.reordered ? read(op.y, at) + sum : sum));
    });
  }

  void pointwise(const SdpaOp& op) {
    for_each(t(op.y).dims, [&](const Index& at) {
      const float x = read(op.x, at);
      const float b = op.b >= 0 ? read(op.b, at) : 0.f;
      float v = 0;
      switch (op.mode) {
        case SdpaPointwise::mul: v = x * b; break;
        case SdpaPointwise::add: v = x + b; break;
        case SdpaPointwise::sub: v = x - b; break;
        case SdpaPointwise::div: v = x / b; break;
        case SdpaPointwise::exp: v = std::exp(x); break;
        case SdpaPointwise::log: v = std::log(x); break;
        case SdpaPointwise::gen_index: v = float(at[op.axis]); break;
        case SdpaPointwise::cmp_ge: v = x >= b ? 1.f : 0.f; break;
        case SdpaPointwise::binary_select: v = read(op.t, at) != 0.f ? x : b; break;
        case SdpaPointwise::identity: v = x; break;
      }
      write(op.y, at, v);
    });
  }

  void reduction(const SdpaOp& op) {
    const SdpaTensor& y = t(op.y);
    const bool max = op.reduce == SdpaReduce::max;
    std::vector<double> acc(std::size_t(extent(y)), max ? -std::numeric_limits<double>::infinity() : 0.0);
    for_each(t(op.x).dims, [&](const Index& at) {
      double& a = acc[std::size_t(offset(y, at))];
      const double v = read(op.x, at);
      a = max ? std::max(a, v) : a + v;
    });
    for_each(y.dims, [&](const Index& at) { write(op.y, at, float(acc[std::size_t(offset(y, at))])); });
  }

  void reshape(const SdpaOp& op) {
    const std::int64_t n = extent(t(op.x));
    if (n != extent(t(op.y))) throw Error("sdpa graph: reshape of " + t(op.x).name + " into " + t(op.y).name + " changes its extent");
    for (std::int64_t i = 0; i < n; ++i) memory_[op.y][i] = stored(t(op.y).type, memory_[op.x][i]);
  }

  const SdpaGraph& g_;
  std::vector<float*> memory_;
  std::vector<std::vector<float>> owned_;
};

}  // namespace

void evaluate_sdpa_graph(const SdpaGraph& g, const std::function<float*(int)>& bound) {
  Evaluation e(g, bound);
  for (const SdpaOp& op : g.ops) e.run(op);
}

}  // namespace moebench
