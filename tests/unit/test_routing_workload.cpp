// Imbalanced routing as a workload: the popularity forms parse (and bad ones name the option and
// what is allowed), the weights are the distributions they say, and steered tokens make a real
// top-1 gate route the shares asked for -- measured by the gate's own arg-max, not assumed.
#include <gtest/gtest.h>
#include <cmath>
#include "moe/init.h"
#include "moe/routing_workload.h"

namespace moebench {
namespace {

Popularity parsed(const std::string& text) {
  Popularity p;
  const auto e = parse_popularity("--popularity", text, &p);
  EXPECT_FALSE(e) << *e;
  return p;
}

TEST(RoutingWorkload, FormsAndWeights) {
  EXPECT_TRUE(popularity_weights(parsed("natural"), 8).empty());
  for (double w : popularity_weights(parsed("uniform"), 4)) EXPECT_DOUBLE_EQ(w, 0.25);
  const std::vector<double> z = popularity_weights(parsed("zipf:1"), 3);  // 1, 1/2, 1/3 over 11/6
  EXPECT_NEAR(z[0], 6.0 / 11, 1e-12);
  EXPECT_NEAR(z[2], 2.0 / 11, 1e-12);
  const std::vector<double> h = popularity_weights(parsed("hot:0.5"), 5);
  EXPECT_DOUBLE_EQ(h[0], 0.5);
  EXPECT_DOUBLE_EQ(h[4], 0.125);
  Popularity p;
  for (const char* bad : {"zipf", "zipf:0", "zipf:-1", "hot:1", "hot:0", "hot:x", "skewed"}) {
    const auto e = parse_popularity("--popularity", bad, &p);
    ASSERT_TRUE(e) << bad;
    EXPECT_NE(e->find("--popularity: '" + std::string(bad) + "'; allowed: natural, uniform, zipf:S"), std::string::npos) << *e;
  }
  EXPECT_DOUBLE_EQ(busiest_over_mean({1, 1, 2, 4}), 2.0);
}

// The share of tokens whose arg-max over x W is each expert.
std::vector<double> routed_shares(const std::vector<float>& x, const std::vector<float>& w, int tokens, int h, int experts) {
  std::vector<double> share(experts, 0);
  for (int t = 0; t < tokens; ++t) {
    int best = 0;
    double best_logit = -1e300;
    for (int e = 0; e < experts; ++e) {
      double logit = 0;
      for (int k = 0; k < h; ++k) logit += double(x[std::size_t(t) * h + k]) * w[std::size_t(k) * experts + e];
      if (logit > best_logit) best_logit = logit, best = e;
    }
    share[best] += 1.0 / tokens;
  }
  return share;
}

TEST(RoutingWorkload, SteeredTokensRouteTheSharesAsked) {
  const int tokens = 4000, h = 64, experts = 16;
  const std::vector<float> gate = normal_vector(std::size_t(h) * experts, 7, 1, 0.02f);
  const std::vector<float> drawn = normal_vector(std::size_t(tokens) * h, 7, 2, 1.f);
  for (const char* form : {"uniform", "zipf:1.2", "hot:0.5"}) {
    const Popularity p = parsed(form);
    std::vector<float> x = drawn;
    steer_tokens(x, tokens, h, 1.0, gate, experts, p, 7, 0);
    const std::vector<double> got = routed_shares(x, gate, tokens, h, experts), want = popularity_weights(p, experts);
    for (int e = 0; e < experts; ++e) EXPECT_NEAR(got[e], want[e], 0.03) << form << " expert " << e;
  }
  // The same token steers the same way wherever it sits: a block of the run drawn on its own.
  std::vector<float> whole = drawn, block(drawn.begin() + 100 * h, drawn.begin() + 200 * h);
  steer_tokens(whole, tokens, h, 1.0, gate, experts, parsed("zipf:1"), 7, 0);
  steer_tokens(block, 100, h, 1.0, gate, experts, parsed("zipf:1"), 7, 100);
  for (int k = 0; k < 100 * h; k += 97) EXPECT_FLOAT_EQ(block[k], whole[100 * h + k]);
  // Natural leaves the tokens as drawn: the gate's own (near uniform) routing.
  std::vector<float> natural = drawn;
  steer_tokens(natural, tokens, h, 1.0, gate, experts, parsed("natural"), 7, 0);
  EXPECT_EQ(natural, drawn);
}

}  // namespace
}  // namespace moebench
