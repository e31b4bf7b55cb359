#include "kernels/embedding.h"
#include "kernels/host_widen.h"
#include <string>

namespace moebench {

static void check_token(const EmbeddingShape& s, int r, std::int32_t t) {
  if (t < 0 || t >= s.vocab)
    throw Error("embedding: token " + std::to_string(t) + " of row " + std::to_string(r) + " is outside the vocabulary of " +
                std::to_string(s.vocab));
}

void embedding_forward_cpu(const EmbeddingShape& s, const std::int32_t* tokens, const float* table, const float* positions,
                           float* y) {
  for (int r = 0; r < s.rows; ++r) {
    check_token(s, r, tokens[r]);
    const float *e = table + std::size_t(tokens[r]) * s.hidden, *p = positions + std::size_t(r % s.seq) * s.hidden;
    float* out = y + std::size_t(r) * s.hidden;
    for (int c = 0; c < s.hidden; ++c) out[c] = e[c] + p[c];
  }
}

void embedding_backward_cpu(const EmbeddingShape& s, const std::int32_t* tokens, const float* dy, float* dtable,
                            float* dpositions) {
  for (int r = 0; r < s.rows; ++r) {
    check_token(s, r, tokens[r]);
    float *e = dtable + std::size_t(tokens[r]) * s.hidden, *p = dpositions + std::size_t(r % s.seq) * s.hidden;
    const float* g = dy + std::size_t(r) * s.hidden;
    for (int c = 0; c < s.hidden; ++c) {
      e[c] += g[c];
      p[c] += g[c];
    }
  }
}

static void check(const EmbeddingShape& s) {
  if (s.rows < 0 || s.seq < 1 || s.hidden < 1 || s.vocab < 1)
    throw Error("embedding: " + std::to_string(s.rows) + " rows, seq " + std::to_string(s.seq) + ", hidden " +
                std::to_string(s.hidden) + ", vocabulary " + std::to_string(s.vocab));
}

void embedding_forward(const Exec& ex, const EmbeddingShape& s, const std::int32_t* tokens, const void* table,
                       const void* positions, void* y, DType t) {
  check(s);
  if (ex.backend == Backend::cuda) return embedding_forward_cuda(s, tokens, table, positions, y, t, ex.stream);
  run_host(ex, "embedding_forward", [=] {
    const std::size_t h = s.hidden;
    WidenedView e(table, t, s.vocab * h, true), p(positions, t, s.seq * h, true), out(y, t, s.rows * h, false);
    embedding_forward_cpu(s, tokens, e.data(), p.data(), out.data());
    out.narrow();
  });
}

void embedding_backward(const Exec& ex, const EmbeddingShape& s, const std::int32_t* tokens, const void* dy, void* dtable,
                        void* dpositions, DType t) {
  check(s);
  if (ex.backend == Backend::cuda) return embedding_backward_cuda(s, tokens, dy, dtable, dpositions, t, ex.stream);
  run_host(ex, "embedding_backward", [=] {
    const std::size_t h = s.hidden;
    WidenedView g(dy, t, s.rows * h, true), e(dtable, t, s.vocab * h, true), p(dpositions, t, s.seq * h, true);
    embedding_backward_cpu(s, tokens, g.data(), e.data(), p.data());
    e.narrow();
    p.narrow();
  });
}

#if !MOEBENCH_WITH_CUDA
void embedding_forward_cuda(const EmbeddingShape&, const std::int32_t*, const void*, const void*, void*, DType, void*) {
  cuda_not_built("embedding_forward");
}
void embedding_backward_cuda(const EmbeddingShape&, const std::int32_t*, const void*, void*, void*, DType, void*) {
  cuda_not_built("embedding_backward");
}
#endif

}  // namespace moebench
