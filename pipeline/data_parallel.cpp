#include "pipeline/data_parallel.h"
#include <string>
#include "kernels/axpy.h"
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
    count_ += n;
    if (p.dtype != DType::f32) sixteen_bit_count_ += n;
  }
  const std::size_t D = dp_ ? std::size_t(dp_->size()) : 1;
  padded_ = (count_ + D - 1) / D * D;
  shard_ = zero1_ ? padded_ / D : padded_;
  flat_w_ = alloc_.allocate(padded_ * 4, MemTag::buffers);
  flat_g_ = alloc_.allocate(padded_ * 4, MemTag::buffers);
  const Stream& s = dev_.default_stream();
  for (Buffer* b : {&flat_w_, &flat_g_}) dev_.fill_zero(b->data(), b->bytes(), s);
  const std::size_t first = zero1_ ? std::size_t(dp_->rank()) * shard_ : 0;
  adam_.add(flat_w_.as<float>() + first, shard_, DType::f32, s);
  s.synchronize();
}

const float* DataParallelAdam::master_of(const Buffer& weight) const {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].weight == &weight && params_[i].dtype != DType::f32) return flat_w_.as<float>() + offset_[i];
  return nullptr;
}

void DataParallelAdam::step(const Stream& s) {
  const Exec ex = dev_.exec(s);
  // Flatten into fp32; the padding stays zero.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const TrainedParameter& p = params_[i];
    float* w = flat_w_.as<float>() + offset_[i];
    float* g = flat_g_.as<float>() + offset_[i];
    if (p.dtype == DType::f32) {
      dev_.copy(w, p.weight->data(), p.weight->bytes(), s);
      dev_.copy(g, p.grad->data(), p.grad->bytes(), s);
      continue;
    }
    const std::size_t n = p.weight->bytes() / dtype_size(p.dtype);
    if (!masters_read_) convert(ex, p.weight->data(), p.dtype, w, DType::f32, n);
    convert(ex, p.grad->data(), p.dtype, g, DType::f32, n);
  }
  masters_read_ = true;
  if (gradient_scale_ != 1.f)  // g += (scale - 1) g
    axpy(ex, padded_, gradient_scale_ - 1.f, flat_g_.data(), flat_g_.data(), DType::f32);
  adam_.next_step();
  if (zero1_) {
    const int r = dp_->rank();
    Buffer shard_g = alloc_.allocate(shard_ * 4, MemTag::temporary, s);
    dp_->reduce_scatter(flat_g_.data(), shard_g.data(), shard_, DType::f32, ReduceOp::sum, s);
    float* w = flat_w_.as<float>() + std::size_t(r) * shard_;
    adam_.update(0, shard_g.data(), s);
    // Every rank's updated shard to everyone (from a copy: all_gather's send and receive differ).
    Buffer mine = alloc_.allocate(shard_ * 4, MemTag::temporary, s);
    dev_.copy(mine.data(), w, shard_ * 4, s);
    dp_->all_gather(mine.data(), flat_w_.data(), shard_, DType::f32, s);
  } else {
    if (dp_ && dp_->size() > 1) dp_->all_reduce(flat_g_.data(), flat_g_.data(), padded_, DType::f32, ReduceOp::sum, s);
    adam_.update(0, flat_g_.data(), s);
  }
  // The masters back into the weights (rounded to 16-bit ones).
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const TrainedParameter& p = params_[i];
    const float* w = flat_w_.as<float>() + offset_[i];
    if (p.dtype == DType::f32)
      dev_.copy(p.weight->data(), w, p.weight->bytes(), s);
    else
      convert(ex, w, DType::f32, p.weight->data(), p.dtype, p.weight->bytes() / dtype_size(p.dtype));
  }
}

}  // namespace moebench
