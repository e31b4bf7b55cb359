// The forward and backward attention graphs (kernels/sdpa_graph.h), in the op order and with the
// tensor types cuDNN's fused attention engines match: virtual tensors fp32 unless the engine
// reads them as the I/O type (the probabilities and score gradients a matmul takes), index
// tensors int32, the causal mask boolean, scalars fp32 passed by value.
#include "kernels/sdpa_graph.h"
#include <limits>
#include <stdexcept>
#include <string>
#include "kernels/exec.h"

namespace moebench {

SdpaType sdpa_type(DType t) {
  switch (t) {
    case DType::f32: return SdpaType::f32;
    case DType::f16: return SdpaType::f16;
    case DType::bf16: return SdpaType::bf16;
    default: throw Error("sdpa: attention tensors are fp32, fp16 or bf16, not " + std::string(dtype_name(t)));
  }
}

std::size_t SdpaGraph::dq_accum_bytes() const {
  if (dq_accum < 0) return 0;
  const auto& d = tensors[dq_accum].dims;
  return std::size_t(d[0] * d[1] * d[2] * d[3]) * sizeof(float);
}

namespace {

using Dims = std::array<std::int64_t, 4>;

class Builder {
 public:
  explicit Builder(const SdpaShape& s) : s_(s) {
    if (s.sequences < 1 || s.heads < 1 || s.seq < 1 || s.head_dim < 1)
      throw Error("sdpa: sequences " + std::to_string(s.sequences) + ", heads " + std::to_string(s.heads) + ", seq " +
                  std::to_string(s.seq) + " and head_dim " + std::to_string(s.head_dim) + " must be >= 1");
    if (s.strides[3] != 1 || s.o_strides[3] != 1) throw Error("sdpa: the head dimension's stride must be 1");
    io_ = sdpa_type(s.t);
  }
  SdpaGraph g;

  std::int64_t b() const { return s_.sequences; }
  std::int64_t h() const { return s_.heads; }
  std::int64_t n() const { return s_.seq; }
  std::int64_t d() const { return s_.head_dim; }
  SdpaType io() const { return io_; }

  int tensor(std::string name, Dims dims, Dims strides, SdpaType type, bool is_virtual) {
    SdpaTensor t;
    t.name = std::move(name);
    t.uid = std::int64_t(g.tensors.size()) + 1;
    t.dims = dims;
    t.strides = strides;
    t.type = type;
    t.is_virtual = is_virtual;
    g.tensors.push_back(t);
    return int(g.tensors.size()) - 1;
  }
  int scalar(std::string name, float value) {
    const int i = tensor(std::move(name), {1, 1, 1, 1}, {1, 1, 1, 1}, SdpaType::f32, false);
    g.tensors[i].by_value = true;
    g.tensors[i].value = value;
    return i;
  }
  // The caller's [sequence, head, row, column] tensors, and their transposes' views.
  int rows(std::string name) { return tensor(std::move(name), {b(), h(), n(), d()}, s_.strides, io_, false); }
  int outputs(std::string name) { return tensor(std::move(name), {b(), h(), n(), d()}, s_.o_strides, io_, false); }
  int columns(std::string name) {
    const Dims& st = s_.strides;
    return tensor(std::move(name), {b(), h(), d(), n()}, {st[0], st[1], st[3], st[2]}, io_, false);
  }
  int square(std::string name, SdpaType type = SdpaType::f32) {
    return tensor(std::move(name), {b(), h(), n(), n()}, {h() * n() * n(), n() * n(), n(), 1}, type, true);
  }
  int per_row(std::string name, bool is_virtual = true) {
    return tensor(std::move(name), {b(), h(), n(), 1}, {h() * n(), n(), 1, 1}, SdpaType::f32, is_virtual);
  }
  int like(std::string name, int of, SdpaType type = SdpaType::f32) {
    return tensor(std::move(name), g.tensors[of].dims, g.tensors[of].strides, type, true);
  }

  int op(SdpaOp o) {
    g.ops.push_back(o);
    return o.y;
  }
  int matmul(int x, int b, int y) { return op({.kind = SdpaOpKind::matmul, .x = x, .b = b, .y = y}); }
  int pointwise(SdpaPointwise mode, int x, int b, int y, int t = -1) {
    return op({.kind = SdpaOpKind::pointwise, .mode = mode, .x = x, .b = b, .t = t, .y = y});
  }
  int reduce(SdpaReduce r, int x, int y) { return op({.kind = SdpaOpKind::reduction, .reduce = r, .x = x, .y = y}); }
  int reshape(int x, int y) { return op({.kind = SdpaOpKind::reshape, .x = x, .y = y}); }

  // scale S, then the causal mask: row i keeps key j <= i; the others get the lowest float, so
  // that exp gives them 0 without an infinity in the arithmetic.
  int scaled_causal(int scores) {
    const int scale = scalar("attn_scale", s_.scale);
    const int scaled = pointwise(SdpaPointwise::mul, scores, scale, like("scaled", scores));
    SdpaOp row{.kind = SdpaOpKind::pointwise, .mode = SdpaPointwise::gen_index, .axis = 2, .compute = SdpaType::i32,
               .x = scaled, .y = like("row_index", scaled, SdpaType::i32)};
    SdpaOp col = row;
    col.axis = 3;
    col.y = like("col_index", scaled, SdpaType::i32);
    op(row);
    op(col);
    SdpaOp ge{.kind = SdpaOpKind::pointwise, .mode = SdpaPointwise::cmp_ge, .compute = SdpaType::boolean, .x = row.y,
              .b = col.y, .y = like("row_ge_col", scaled, SdpaType::boolean)};
    op(ge);
    const int lowest = scalar("masked", std::numeric_limits<float>::lowest());
    return pointwise(SdpaPointwise::binary_select, scaled, lowest, like("masked_scores", scaled), ge.y);
  }

 private:
  SdpaShape s_;
  SdpaType io_;
};

}  // namespace

SdpaGraph sdpa_forward_graph(const SdpaShape& s) {
  Builder gb(s);
  SdpaGraph& g = gb.g;
  g.q = gb.rows("Q");
  g.k = gb.columns("K^T");
  g.v = gb.rows("V");
  g.o = gb.outputs("O");
  g.stats = gb.per_row("stats", false);
  const int scores = gb.matmul(g.q, g.k, gb.square("S"));
  const int masked = gb.scaled_causal(scores);
  const int max = gb.reduce(SdpaReduce::max, masked, gb.per_row("row_max"));
  const int shifted = gb.pointwise(SdpaPointwise::sub, masked, max, gb.like("S_minus_max", masked));
  const int e = gb.pointwise(SdpaPointwise::exp, shifted, -1, gb.like("exp", masked));
  const int z = gb.reduce(SdpaReduce::add, e, gb.per_row("row_sum"));
  const int log_z = gb.pointwise(SdpaPointwise::log, z, -1, gb.per_row("log_sum"));
  gb.pointwise(SdpaPointwise::add, max, log_z, g.stats);
  const int p = gb.pointwise(SdpaPointwise::div, e, z, gb.like("P", masked, gb.io()));
  gb.matmul(p, g.v, g.o);
  return g;
}

SdpaGraph sdpa_backward_graph(const SdpaShape& s) {
  Builder gb(s);
  SdpaGraph& g = gb.g;
  const auto b = gb.b(), h = gb.h(), n = gb.n(), d = gb.d();
  g.q = gb.rows("Q");
  g.k = gb.columns("K^T");
  g.v = gb.columns("V^T");
  g.o = gb.outputs("O");
  g.d_o = gb.outputs("dO");
  g.stats = gb.per_row("stats", false);
  g.dq = gb.rows("dQ");
  g.dk = gb.rows("dK");
  g.dv = gb.rows("dV");
  const int one = gb.scalar("one", 1.f);
  // D = rowsum(dO o O)
  const int prod = gb.pointwise(SdpaPointwise::mul, g.d_o, g.o, gb.like("dO_O", g.o));
  const int row_dot = gb.reduce(SdpaReduce::add, prod, gb.per_row("row_dot"));
  const int delta = gb.pointwise(SdpaPointwise::mul, row_dot, one, gb.per_row("delta"));
  // P from the forward's statistics; dV = P^T dO
  const int masked = gb.scaled_causal(gb.matmul(g.q, g.k, gb.square("S")));
  const int shifted = gb.pointwise(SdpaPointwise::sub, masked, g.stats, gb.like("S_minus_stats", masked));
  const int p = gb.pointwise(SdpaPointwise::exp, shifted, -1, gb.like("P", masked));
  const int p_t = gb.reshape(p, gb.tensor("P^T", {b, h, n, n}, {h * n * n, n * n, 1, n}, gb.io(), true));
  gb.matmul(p_t, g.d_o, g.dv);
  // dS = scale P (dO V^T - D)
  const int dp = gb.matmul(g.d_o, g.v, gb.square("dP"));
  const int dp_kept = gb.pointwise(SdpaPointwise::mul, dp, one, gb.like("dP_kept", dp));
  const int centred = gb.pointwise(SdpaPointwise::sub, dp_kept, delta, gb.like("dP_minus_D", dp));
  const int ds_unscaled = gb.pointwise(SdpaPointwise::mul, centred, p, gb.like("P_dP", dp));
  const int scale = gb.scalar("attn_scale", s.scale);
  const int ds = gb.pointwise(SdpaPointwise::mul, ds_unscaled, scale, gb.like("dS", dp));
  // dK = dS^T Q
  const int ds_t = gb.reshape(ds, gb.tensor("dS^T", {b, h, n, n}, {h * n * n, n * n, 1, n}, gb.io(), true));
  gb.matmul(ds_t, g.q, g.dk);
  // dQ = dS K into the fp32 accumulator, then to dQ's type
  const auto& kt = g.tensors[g.k];
  const int k = gb.reshape(g.k, gb.tensor("K", {b, h, n, d}, {kt.strides[0], kt.strides[1], kt.strides[3], kt.strides[2]},
                                          SdpaType::f32, true));
  g.dq_accum = gb.tensor("dQ_accum", {b, h, n, d}, {h * n * d, n * d, d, 1}, SdpaType::f32, false);
  g.tensors[g.dq_accum].reordered = true;
  gb.matmul(ds, k, g.dq_accum);
  gb.pointwise(SdpaPointwise::identity, g.dq_accum, -1, g.dq);
  return g;
}

std::string describe_sdpa_graph(const SdpaGraph& g) {
  static const char* types[] = {"fp32", "fp16", "bf16", "int32", "bool"};
  static const char* kinds[] = {"matmul", "pointwise", "reduction", "reshape"};
  static const char* modes[] = {"mul", "add", "sub", "div", "exp", "log", "gen_index", "cmp_ge", "binary_select", "identity"};
  auto four = [](const std::array<std::int64_t, 4>& v) {
    std::string s(1, '[');
    for (int i = 0; i < 4; ++i) s.append(std::to_string(v[i])).push_back(i < 3 ? ',' : ']');
    return s;
  };
  std::string out;
  for (const SdpaTensor& t : g.tensors) {
    out += "  tensor " + std::to_string(t.uid) + " " + t.name + " dims " + four(t.dims) + " strides " + four(t.strides) + " ";
    out += types[int(t.type)];
    out += t.by_value ? " by value" : t.is_virtual ? " virtual" : "";
    out += t.reordered ? " F16x16\n" : "\n";
  }
  auto name = [&](int i) { return i < 0 ? std::string("-") : std::to_string(g.tensors[i].uid); };
  for (const SdpaOp& o : g.ops) {
    out += "  op ";
    out += kinds[int(o.kind)];
    if (o.kind == SdpaOpKind::pointwise) out += std::string(" ") + modes[int(o.mode)];
    if (o.kind == SdpaOpKind::reduction) out += o.reduce == SdpaReduce::max ? " max" : " add";
    out += " (" + name(o.x) + ", " + name(o.b) + ", " + name(o.t) + ") -> " + name(o.y) + "\n";
  }
  return out;
}

}  // namespace moebench
