#include "kernels/attention_panels.h"
#include <algorithm>
#include <cmath>
#include <string>
#include "kernels/host_widen.h"

namespace moebench {

namespace {
// Keys row i of the panel sees: the first visible(i) columns.
int visible(const AttentionPanel& p, int i) { return std::clamp(p.row0 + i - p.col0 + 1, 0, p.cols); }
std::size_t panel_elements(const AttentionPanel& p) { return std::size_t(p.heads) * p.rows * p.cols; }

void check_panel(const AttentionPanel& p, DType t, bool forward, const char* op) {
  const bool shape_ok = p.heads >= 1 && p.rows >= 0 && p.cols >= 1 && p.row0 >= 0 && p.col0 >= 0 &&
                        p.row0 + p.rows <= p.seq && p.col0 + p.cols <= p.seq && std::isfinite(p.scale);
  const bool sees_all = !forward || (p.col0 == 0 && p.cols >= p.row0 + p.rows);
  if (!shape_ok || !sees_all)
    throw Error(std::string(op) + ": panel of " + std::to_string(p.rows) + " rows from row " + std::to_string(p.row0) +
                " x " + std::to_string(p.cols) + " keys from key " + std::to_string(p.col0) + " in a sequence of " +
                std::to_string(p.seq) + " (" + std::to_string(p.heads) + " heads)" +
                (sees_all ? "" : ": a forward panel must hold every key its rows see"));
  if (!is_float(t)) throw Error(std::string(op) + ": " + std::string(dtype_name(t)) + " data; allowed: fp32, fp16 and bf16");
}
}  // namespace

void attention_panel_softmax_forward_cpu(const AttentionPanel& p, float* scores, float* stats) {
  for (int h = 0; h < p.heads; ++h)
    for (int i = 0; i < p.rows; ++i) {
      float* s = scores + (std::size_t(h) * p.rows + i) * p.cols;
      const int n = visible(p, i);
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) mx = std::max(mx, p.scale * s[j]);
      double sum = 0;
      for (int j = 0; j < n; ++j) sum += std::exp(double(p.scale * s[j] - mx));
      const float lse = mx + float(std::log(sum));
      for (int j = 0; j < p.cols; ++j) s[j] = j < n ? std::exp(p.scale * s[j] - lse) : 0.f;
      stats[std::size_t(h) * p.seq + p.row0 + i] = lse;
    }
}

void attention_panel_softmax_backward_cpu(const AttentionPanel& p, float* scores, float* dprobs, const float* stats,
                                          const float* delta) {
  for (int h = 0; h < p.heads; ++h)
    for (int i = 0; i < p.rows; ++i) {
      const std::size_t row = (std::size_t(h) * p.rows + i) * p.cols, at = std::size_t(h) * p.seq + p.row0 + i;
      float *s = scores + row, *dp = dprobs + row;
      const int n = visible(p, i);
      for (int j = 0; j < p.cols; ++j) {
        const float prob = j < n ? std::exp(p.scale * s[j] - stats[at]) : 0.f;
        s[j] = prob;
        dp[j] = p.scale * prob * (dp[j] - delta[at]);
      }
    }
}

void attention_row_dot_cpu(int sequences, int seq, int heads, int head_dim, int ld, const float* dout, const float* out,
                           float* delta) {
  for (int b = 0; b < sequences; ++b)
    for (int i = 0; i < seq; ++i) {
      const std::size_t row = (std::size_t(b) * seq + i) * ld;
      for (int h = 0; h < heads; ++h) {
        double dot = 0;
        for (int c = 0; c < head_dim; ++c) dot += double(dout[row + h * head_dim + c]) * out[row + h * head_dim + c];
        delta[(std::size_t(h) * sequences + b) * seq + i] = float(dot);
      }
    }
}

void attention_panel_softmax_forward(const Exec& ex, const AttentionPanel& p, void* scores, float* stats, DType t) {
  check_panel(p, t, true, "attention_panel_softmax_forward");
  if (p.rows == 0) return;
  if (ex.backend == Backend::cuda) return attention_panel_softmax_forward_cuda(p, scores, stats, t, ex.stream);
  run_host(ex, "attention_panel_softmax_forward", [=] {
    WidenedView s(scores, t, panel_elements(p), true);
    attention_panel_softmax_forward_cpu(p, s.data(), stats);
    s.narrow();
  });
}

void attention_panel_softmax_backward(const Exec& ex, const AttentionPanel& p, void* scores, void* dprobs,
                                      const float* stats, const float* delta, DType t) {
  check_panel(p, t, false, "attention_panel_softmax_backward");
  if (p.rows == 0) return;
  if (ex.backend == Backend::cuda)
    return attention_panel_softmax_backward_cuda(p, scores, dprobs, stats, delta, t, ex.stream);
  run_host(ex, "attention_panel_softmax_backward", [=] {
    WidenedView s(scores, t, panel_elements(p), true), dp(dprobs, t, panel_elements(p), true);
    attention_panel_softmax_backward_cpu(p, s.data(), dp.data(), stats, delta);
    s.narrow();
    dp.narrow();
  });
}

void attention_row_dot(const Exec& ex, int sequences, int seq, int heads, int head_dim, int ld, const void* dout,
                       const void* out, float* delta, DType t) {
  if (sequences < 0 || seq < 1 || heads < 1 || head_dim < 1 || ld < heads * head_dim)
    throw Error("attention_row_dot: " + std::to_string(sequences) + " sequences of " + std::to_string(seq) + " rows, " +
                std::to_string(heads) + " heads of " + std::to_string(head_dim) + " columns, rows " + std::to_string(ld) +
                " apart");
  if (!is_float(t)) throw Error("attention_row_dot: " + std::string(dtype_name(t)) + " data; allowed: fp32, fp16 and bf16");
  if (sequences == 0) return;
  if (ex.backend == Backend::cuda)
    return attention_row_dot_cuda(sequences, seq, heads, head_dim, ld, dout, out, delta, t, ex.stream);
  run_host(ex, "attention_row_dot", [=] {
    const std::size_t rows = std::size_t(sequences) * seq, cols = std::size_t(heads) * head_dim;
    WidenedView g(dout, t, rows, cols, ld, true), o(out, t, rows, cols, ld, true);
    attention_row_dot_cpu(sequences, seq, heads, head_dim, ld, g.data(), o.data(), delta);
  });
}

#if !MOEBENCH_WITH_CUDA
void attention_panel_softmax_forward_cuda(const AttentionPanel&, void*, float*, DType, void*) {
  cuda_not_built("attention_panel_softmax_forward");
}
void attention_panel_softmax_backward_cuda(const AttentionPanel&, void*, void*, const float*, const float*, DType, void*) {
  cuda_not_built("attention_panel_softmax_backward");
}
void attention_row_dot_cuda(int, int, int, int, int, const void*, const void*, float*, DType, void*) {
  cuda_not_built("attention_row_dot");
}
#endif

}  // namespace moebench
