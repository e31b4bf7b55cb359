#include "runtime/adamw.h"
#include <string>
#include "kernels/convert.h"
#include "kernels/exec.h"

namespace moebench {

AdamW::AdamW(AdamStep hyper, Device& dev, TrackingAllocator& alloc) : hyper_(hyper), dev_(dev), alloc_(alloc) {
  hyper_.step = 0;
}

std::size_t AdamW::add(void* weight, std::size_t count, DType dtype, const Stream& s) {
  if (!is_float(dtype))
    throw Error("AdamW: a parameter in " + std::string(dtype_name(dtype)) + "; allowed: fp32, fp16 and bf16");
  Parameter p{weight, count, dtype, {}, {}, {}};
  if (dtype != DType::f32) {
    p.master = alloc_.allocate(count * 4, MemTag::model_states);
    convert(dev_.exec(s), weight, dtype, p.master.data(), DType::f32, count);
  }
  for (Buffer* moment : {&p.m, &p.v}) {
    *moment = alloc_.allocate(count * 4, MemTag::model_states);
    dev_.fill_zero(moment->data(), count * 4, s);
  }
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

void AdamW::update(std::size_t i, const void* grad, const Stream& s) {
  if (hyper_.step < 1) throw Error("AdamW: update() before the first next_step()");
  Parameter& p = params_.at(i);
  float* master = p.master ? p.master.as<float>() : static_cast<float*>(p.weight);
  adam_step(dev_.exec(s), p.count, hyper_, master, p.m.as<float>(), p.v.as<float>(), grad, p.weight, p.dtype);
}

const float* AdamW::master(std::size_t i) const {
  const Parameter& p = params_.at(i);
  return p.master ? p.master.as<float>() : static_cast<const float*>(p.weight);
}

std::size_t AdamW::moment_bytes() const {
  std::size_t b = 0;
  for (const Parameter& p : params_) b += p.m.bytes() + p.v.bytes();
  return b;
}

std::size_t AdamW::master_bytes() const {
  std::size_t b = 0;
  for (const Parameter& p : params_) b += p.master ? p.master.bytes() : 0;
  return b;
}

}  // namespace moebench
