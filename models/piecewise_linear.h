// A continuous piecewise-linear function fitted by least squares (MPMoE Fig. 9: the speed of
// communication, computation and memory copies over data volume): t(v) = a + b v +
// sum_j c_j max(0, v - k_j) with breakpoints k_j, linear beyond the last one. With a breakpoint
// at every interior sample the fit passes through the samples; fewer breakpoints smooth them.
#pragma once
#include <vector>

namespace moebench {

class PiecewiseLinear {
 public:
  PiecewiseLinear() = default;
  // Least squares over the samples (v_i, t_i); breakpoints strictly inside the samples' range.
  // Throws Error with fewer than two distinct volumes or more parameters than samples.
  static PiecewiseLinear fit(const std::vector<double>& v, const std::vector<double>& t, std::vector<double> breakpoints);
  // Breakpoints at every other interior sample volume (sorted), the default the benches use.
  static std::vector<double> every_other(std::vector<double> v);
  double operator()(double v) const;
  const std::vector<double>& breakpoints() const { return knots_; }
  // max |fit - sample| / sample over the fitted samples.
  double max_relative_residual() const { return residual_; }

 private:
  double a_ = 0, b_ = 0;
  std::vector<double> knots_, c_;
  double residual_ = 0;
};

}  // namespace moebench
