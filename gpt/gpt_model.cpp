#include "gpt/gpt_model.h"

namespace moebench {

double GptModel::forward_backward(const std::int32_t* tokens, const std::int32_t* targets, int sequences, float grad_scale,
                                  const Stream& s) {
  const double before = stage_.loss_sum(s);
  stage_.set_batch({tokens}, {targets}, sequences, grad_scale);
  stage_.forward(0, nullptr, nullptr, sequences * stage_.config_seq(), s);
  stage_.backward(0, nullptr, nullptr, s);
  return stage_.loss_sum(s) - before;
}

}  // namespace moebench
