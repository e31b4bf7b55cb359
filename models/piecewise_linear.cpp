#include "models/piecewise_linear.h"
#include <algorithm>
#include <cmath>
#include <string>
#include "kernels/exec.h"

namespace moebench {

static std::vector<double> basis(double v, const std::vector<double>& knots) {
  std::vector<double> row = {1.0, v};
  for (double k : knots) row.push_back(std::max(0.0, v - k));
  return row;
}

PiecewiseLinear PiecewiseLinear::fit(const std::vector<double>& v, const std::vector<double>& t,
                                     std::vector<double> breakpoints) {
  if (v.size() != t.size()) throw Error("piecewise-linear fit: volumes and times differ in number");
  std::vector<double> distinct = v;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() < 2) throw Error("piecewise-linear fit: needs samples at two volumes at least");
  std::sort(breakpoints.begin(), breakpoints.end());
  const std::size_t p = 2 + breakpoints.size();
  if (p > distinct.size())
    throw Error("piecewise-linear fit: " + std::to_string(breakpoints.size()) + " breakpoints need " + std::to_string(p) +
                " distinct volumes, got " + std::to_string(distinct.size()));
  // Normal equations, scaled so the columns are of one size, solved by Gaussian elimination.
  const double scale = distinct.back();
  std::vector<double> knots_scaled;
  for (double k : breakpoints) knots_scaled.push_back(k / scale);
  std::vector<std::vector<double>> A(p, std::vector<double>(p + 1, 0.0));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto row = basis(v[i] / scale, knots_scaled);
    for (std::size_t r = 0; r < p; ++r) {
      for (std::size_t c = 0; c < p; ++c) A[r][c] += row[r] * row[c];
      A[r][p] += row[r] * t[i];
    }
  }
  for (std::size_t col = 0; col < p; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < p; ++r)
      if (std::fabs(A[r][col]) > std::fabs(A[pivot][col])) pivot = r;
    if (std::fabs(A[pivot][col]) < 1e-300) throw Error("piecewise-linear fit: no sample between two breakpoints");
    std::swap(A[col], A[pivot]);
    for (std::size_t r = 0; r < p; ++r) {
      if (r == col) continue;
      const double f = A[r][col] / A[col][col];
      for (std::size_t c = col; c <= p; ++c) A[r][c] -= f * A[col][c];
    }
  }
  PiecewiseLinear out;
  out.a_ = A[0][p] / A[0][0];
  out.b_ = A[1][p] / A[1][1] / scale;
  for (std::size_t j = 0; j < breakpoints.size(); ++j) out.c_.push_back(A[2 + j][p] / A[2 + j][2 + j] / scale);
  out.knots_ = breakpoints;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (t[i] != 0) out.residual_ = std::max(out.residual_, std::fabs(out(v[i]) - t[i]) / std::fabs(t[i]));
  return out;
}

std::vector<double> PiecewiseLinear::every_other(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::vector<double> out;
  for (std::size_t i = 2; i + 1 < v.size(); i += 2) out.push_back(v[i]);
  return out;
}

double PiecewiseLinear::operator()(double v) const {
  double t = a_ + b_ * v;
  for (std::size_t j = 0; j < knots_.size(); ++j) t += c_[j] * std::max(0.0, v - knots_[j]);
  return t;
}

}  // namespace moebench
