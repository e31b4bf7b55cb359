#include "gpt/data_parallel.h"
#include <algorithm>
#include <string>
#include "kernels/convert.h"

namespace moebench {

namespace {
std::vector<TrainedParameter> fp32_parameters(const std::vector<std::pair<Buffer*, Buffer*>>& pairs) {
  std::vector<TrainedParameter> out;
  for (const auto& [w, g] : pairs) out.push_back({w, g, DType::f32});
  return out;
}
}  // namespace

DataParallelAdam::DataParallelAdam(const std::vector<std::pair<Buffer*, Buffer*>>& params, Communicator* dp, bool zero1,
                                   AdamStep hyper, Device& dev, TrackingAllocator& alloc)
    : DataParallelAdam(fp32_parameters(params), dp, zero1, hyper, dev, alloc) {}

DataParallelAdam::DataParallelAdam(std::vector<TrainedParameter> params, Communicator* dp, bool zero1, AdamStep hyper,
                                   Device& dev, TrackingAllocator& alloc)
    : params_(std::move(params)), dp_(dp), zero1_(zero1 && dp && dp->size() > 1), dev_(dev), alloc_(alloc),
      adam_(hyper, dev, alloc) {
  for (const TrainedParameter& p : params_) {
    if (!is_float(p.dtype))
      throw Error("DataParallelAdam: a parameter in " + std::string(dtype_name(p.dtype)) + "; allowed: fp32, fp16 and bf16");
    if (p.weight->bytes() != p.grad->bytes()) throw Error("DataParallelAdam: a parameter and its gradient differ in size");
    const std::size_t n = p.weight->bytes() / dtype_size(p.dtype);
    offset_.push_back(count_);
    master_offset_.push_back(p.dtype == DType::f32 ? kNoMaster : sixteen_bit_count_);
    count_ += n;
    if (p.dtype != DType::f32) sixteen_bit_count_ += n;
  }
  const std::size_t D = dp_ ? std::size_t(dp_->size()) : 1;
  padded_ = (count_ + D - 1) / D * D;
  shard_ = zero1_ ? padded_ / D : padded_;
  const Stream& s = dev_.default_stream();
  // ZeRO-1 steps a shard of the flat fp32 parameters; otherwise each parameter steps in place,
  // and only the 16-bit ones need fp32 masters here.
  flat_w_ = alloc_.allocate(std::max<std::size_t>(zero1_ ? padded_ : sixteen_bit_count_, 1) * 4, MemTag::buffers);
  if (zero1_ || D > 1) {  // the gradients summed over the group, in fp32
    flat_g_ = alloc_.allocate(padded_ * 4, MemTag::buffers);
    dev_.fill_zero(flat_g_.data(), flat_g_.bytes(), s);
  }
  if (zero1_) {
    dev_.fill_zero(flat_w_.data(), flat_w_.bytes(), s);
    adam_.add(flat_w_.as<float>() + std::size_t(dp_->rank()) * shard_, shard_, DType::f32, s);
  } else {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const TrainedParameter& p = params_[i];
      const std::size_t n = p.weight->bytes() / dtype_size(p.dtype);
      if (p.dtype == DType::f32)
        adam_.add(p.weight->data(), n, DType::f32, s);
      else
        adam_.add(p.weight->data(), n, p.dtype, flat_w_.as<float>() + master_offset_[i]);
    }
  }
  s.synchronize();
}

const float* DataParallelAdam::master_of(const Buffer& weight) const {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].weight == &weight && params_[i].dtype != DType::f32)
      return flat_w_.as<float>() + (zero1_ ? offset_[i] : master_offset_[i]);
  return nullptr;
}

void DataParallelAdam::step(const Stream& s) {
  adam_.set_gradient_scale(gradient_scale_);
  adam_.next_step(s);
  if (zero1_)
    step_zero1(s);
  else
    step_in_place(s);
}

// Each parameter in one AdamW pass that reads its gradient (in its dtype with no group; summed in
// fp32 over the group otherwise) and writes its weight: no flattening, no rounding pass.
void DataParallelAdam::step_in_place(const Stream& s) {
  const Exec ex = dev_.exec(s);
  if (!masters_read_)
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const TrainedParameter& p = params_[i];
      if (p.dtype != DType::f32)
        convert(ex, p.weight->data(), p.dtype, flat_w_.as<float>() + master_offset_[i], DType::f32,
                p.weight->bytes() / dtype_size(p.dtype));
    }
  masters_read_ = true;
  if (!flat_g_) {
    for (std::size_t i = 0; i < params_.size(); ++i) adam_.update(i, params_[i].grad->data(), params_[i].dtype, s);
    return;
  }
  widen_gradients(ex, s);
  dp_->all_reduce(flat_g_.data(), flat_g_.data(), padded_, DType::f32, ReduceOp::sum, s);
  for (std::size_t i = 0; i < params_.size(); ++i) adam_.update(i, flat_g_.as<float>() + offset_[i], DType::f32, s);
}

void DataParallelAdam::widen_gradients(const Exec& ex, const Stream& s) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const TrainedParameter& p = params_[i];
    float* g = flat_g_.as<float>() + offset_[i];
    if (p.dtype == DType::f32)
      dev_.copy(g, p.grad->data(), p.grad->bytes(), s);
    else
      convert(ex, p.grad->data(), p.dtype, g, DType::f32, p.grad->bytes() / dtype_size(p.dtype));
  }
}

void DataParallelAdam::step_zero1(const Stream& s) {
  const Exec ex = dev_.exec(s);
  // Flatten into fp32 (the padding stays zero): fp32 weights are read back at every step, 16-bit
  // ones give their masters at the first.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const TrainedParameter& p = params_[i];
    float* w = flat_w_.as<float>() + offset_[i];
    if (p.dtype == DType::f32)
      dev_.copy(w, p.weight->data(), p.weight->bytes(), s);
    else if (!masters_read_)
      convert(ex, p.weight->data(), p.dtype, w, DType::f32, p.weight->bytes() / dtype_size(p.dtype));
  }
  masters_read_ = true;
  widen_gradients(ex, s);
  const int r = dp_->rank();
  Buffer shard_g = alloc_.allocate(shard_ * 4, MemTag::temporary, s);
  dp_->reduce_scatter(flat_g_.data(), shard_g.data(), shard_, DType::f32, ReduceOp::sum, s);
  float* w = flat_w_.as<float>() + std::size_t(r) * shard_;
  adam_.update(0, shard_g.data(), s);
  // Every rank's updated shard to everyone (from a copy: all_gather's send and receive differ).
  Buffer mine = alloc_.allocate(shard_ * 4, MemTag::temporary, s);
  dev_.copy(mine.data(), w, shard_ * 4, s);
  dp_->all_gather(mine.data(), flat_w_.data(), shard_, DType::f32, s);
  // The masters back into the weights (rounded to 16-bit ones).
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const TrainedParameter& p = params_[i];
    const float* mw = flat_w_.as<float>() + offset_[i];
    if (p.dtype == DType::f32)
      dev_.copy(p.weight->data(), mw, p.weight->bytes(), s);
    else
      convert(ex, mw, DType::f32, p.weight->data(), p.dtype, p.weight->bytes() / dtype_size(p.dtype));
  }
}

}  // namespace moebench
