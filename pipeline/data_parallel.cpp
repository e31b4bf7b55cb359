#include "pipeline/data_parallel.h"
#include <string>

namespace moebench {

DataParallelAdam::DataParallelAdam(std::vector<std::pair<Buffer*, Buffer*>> params, Communicator* dp, bool zero1,
                                   AdamStep hyper, Device& dev, TrackingAllocator& alloc)
    : params_(std::move(params)), dp_(dp), zero1_(zero1 && dp && dp->size() > 1), hyper_(hyper), dev_(dev), alloc_(alloc) {
  hyper_.step = 0;  // step() counts from 1
  for (auto& [w, g] : params_) {
    if (w->bytes() != g->bytes()) throw Error("DataParallelAdam: a parameter and its gradient differ in size");
    count_ += w->bytes() / 4;
  }
  const std::size_t D = dp_ ? std::size_t(dp_->size()) : 1;
  padded_ = (count_ + D - 1) / D * D;
  shard_ = zero1_ ? padded_ / D : padded_;
  flat_w_ = alloc_.allocate(padded_ * 4, MemTag::buffers);
  flat_g_ = alloc_.allocate(padded_ * 4, MemTag::buffers);
  m_ = alloc_.allocate(shard_ * 4, MemTag::model_states);
  v_ = alloc_.allocate(shard_ * 4, MemTag::model_states);
  const Stream& s = dev_.default_stream();
  for (Buffer* b : {&flat_w_, &flat_g_, &m_, &v_}) dev_.fill_zero(b->data(), b->bytes(), s);
  s.synchronize();
}

void DataParallelAdam::step(const Stream& s) {
  // Flatten; the padding stays zero.
  std::size_t at = 0;
  for (auto& [w, g] : params_) {
    dev_.copy(flat_w_.as<char>() + at * 4, w->data(), w->bytes(), s);
    dev_.copy(flat_g_.as<char>() + at * 4, g->data(), g->bytes(), s);
    at += w->bytes() / 4;
  }
  ++hyper_.step;
  const Exec ex = dev_.exec(s);
  if (zero1_) {
    const int r = dp_->rank();
    Buffer shard_g = alloc_.allocate(shard_ * 4, MemTag::temporary, s);
    dp_->reduce_scatter(flat_g_.data(), shard_g.data(), shard_, DType::f32, ReduceOp::sum, s);
    float* w = flat_w_.as<float>() + std::size_t(r) * shard_;
    adam_step(ex, shard_, hyper_, w, m_.as<float>(), v_.as<float>(), shard_g.data(), w, DType::f32);
    // Every rank's updated shard to everyone (from a copy: all_gather's send and receive differ).
    Buffer mine = alloc_.allocate(shard_ * 4, MemTag::temporary, s);
    dev_.copy(mine.data(), w, shard_ * 4, s);
    dp_->all_gather(mine.data(), flat_w_.data(), shard_, DType::f32, s);
  } else {
    if (dp_ && dp_->size() > 1) dp_->all_reduce(flat_g_.data(), flat_g_.data(), padded_, DType::f32, ReduceOp::sum, s);
    adam_step(ex, padded_, hyper_, flat_w_.as<float>(), m_.as<float>(), v_.as<float>(), flat_g_.data(), flat_w_.data(),
              DType::f32);
  }
  at = 0;
  for (auto& [w, g] : params_) {
    dev_.copy(w->data(), flat_w_.as<char>() + at * 4, w->bytes(), s);
    at += w->bytes() / 4;
  }
}

}  // namespace moebench
