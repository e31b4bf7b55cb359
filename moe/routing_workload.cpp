#include "moe/routing_workload.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include "moe/init.h"

namespace moebench {
namespace {

constexpr double kSteer = 8;              // in standard deviations of a random token's logit
constexpr std::uint64_t kDrawStream = 91;  // the per-token draws' stream under the seed

bool number_after(const std::string& text, std::size_t at, double* v) {
  const std::string s = text.substr(at);
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && std::isfinite(*v);
}

}  // namespace

std::optional<std::string> parse_popularity(const std::string& option, const std::string& text, Popularity* out) {
  Popularity p;
  p.text = text;
  double v = 0;
  if (text == "natural") {
    p.kind = Popularity::Kind::natural;
  } else if (text == "uniform") {
    p.kind = Popularity::Kind::uniform;
  } else if (text.rfind("zipf:", 0) == 0 && number_after(text, 5, &v) && v > 0) {
    p.kind = Popularity::Kind::zipf;
    p.parameter = v;
  } else if (text.rfind("hot:", 0) == 0 && number_after(text, 4, &v) && v > 0 && v < 1) {
    p.kind = Popularity::Kind::hot;
    p.parameter = v;
  } else {
    return option + ": '" + text + "'; allowed: natural, uniform, zipf:S (S > 0), hot:F (0 < F < 1)";
  }
  *out = p;
  return std::nullopt;
}

std::vector<double> popularity_weights(const Popularity& p, int experts) {
  std::vector<double> w;
  switch (p.kind) {
    case Popularity::Kind::natural: return w;
    case Popularity::Kind::uniform: w.assign(experts, 1.0); break;
    case Popularity::Kind::zipf:
      for (int i = 0; i < experts; ++i) w.push_back(1.0 / std::pow(i + 1.0, p.parameter));
      break;
    case Popularity::Kind::hot:
      if (experts == 1) return {1.0};
      w.assign(experts, (1 - p.parameter) / (experts - 1));
      w[0] = p.parameter;
      break;
  }
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

void steer_tokens(std::vector<float>& x, int tokens, int hidden, double token_std, const std::vector<float>& gate,
                  int experts, const Popularity& p, std::uint64_t seed, std::size_t first_token) {
  const std::vector<double> w = popularity_weights(p, experts);
  if (w.empty()) return;
  std::vector<double> cdf(w.size());
  std::partial_sum(w.begin(), w.end(), cdf.begin());
  // Unit columns of the gate; a random token's projection on one spreads by token_std.
  std::vector<std::vector<double>> unit(experts, std::vector<double>(hidden));
  for (int e = 0; e < experts; ++e) {
    double norm = 0;
    for (int k = 0; k < hidden; ++k) norm += double(gate[std::size_t(k) * experts + e]) * gate[std::size_t(k) * experts + e];
    norm = std::sqrt(std::max(norm, 1e-30));
    for (int k = 0; k < hidden; ++k) unit[e][k] = gate[std::size_t(k) * experts + e] / norm;
  }
  const std::vector<float> z = normal_vector(std::size_t(tokens), seed, kDrawStream, 1.f, first_token);
  for (int t = 0; t < tokens; ++t) {
    const double u = 0.5 * std::erfc(-z[t] / std::sqrt(2.0));  // uniform in (0, 1), the same for the same token
    const int e = int(std::min<std::ptrdiff_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin(), experts - 1));
    for (int k = 0; k < hidden; ++k) x[std::size_t(t) * hidden + k] += float(kSteer * token_std * unit[e][k]);
  }
}

double busiest_over_mean(const std::vector<double>& per_expert) {
  if (per_expert.empty()) return 0;
  const double mean = std::accumulate(per_expert.begin(), per_expert.end(), 0.0) / per_expert.size();
  return mean > 0 ? *std::max_element(per_expert.begin(), per_expert.end()) / mean : 0;
}

}  // namespace moebench
