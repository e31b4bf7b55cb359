#include "runtime/adamw.h"
#include <string>
#include "kernels/convert.h"
#include "kernels/exec.h"

namespace moebench {

AdamW::AdamW(AdamStep hyper, Device& dev, TrackingAllocator& alloc) : hyper_(hyper), dev_(dev), alloc_(alloc) {
  hyper_.step = 0;
  hyper_.step_count = nullptr;
}

void AdamW::next_step(const Stream& s) {
  if (!step_count_) {
    if (s.capturing())  // a replay would zero the count again
      throw Error("AdamW: the first step is being captured into a graph; run it before the capture (it makes the step count)");
    step_count_ = alloc_.allocate(sizeof(std::int32_t), MemTag::model_states, s);
    dev_.fill_zero(step_count_.data(), sizeof(std::int32_t), s);
    hyper_.step_count = step_count_.as<std::int32_t>();
  }
  adam_count_step(dev_.exec(s), step_count_.as<std::int32_t>());
  hyper_.step = ++steps_;
}

std::size_t AdamW::add(void* weight, std::size_t count, DType dtype, const Stream& s) {
  if (!is_float(dtype))
    throw Error("AdamW: a parameter in " + std::string(dtype_name(dtype)) + "; allowed: fp32, fp16 and bf16");
  Parameter p{weight, count, dtype, static_cast<float*>(weight), {}, {}, {}};
  if (dtype != DType::f32) {
    p.own_master = alloc_.allocate(count * 4, MemTag::model_states);
    convert(dev_.exec(s), weight, dtype, p.own_master.data(), DType::f32, count);
    p.master = p.own_master.as<float>();
  }
  return add_moments(std::move(p), s);
}

std::size_t AdamW::add(void* weight, std::size_t count, DType dtype, float* master) {
  if (!is_float(dtype) || dtype == DType::f32)
    throw Error("AdamW: a parameter with a master of its own in " + std::string(dtype_name(dtype)) +
                "; allowed: fp16 and bf16 (an fp32 parameter is its own master)");
  if (!master) throw Error("AdamW: a 16-bit parameter's master is missing");
  return add_moments(Parameter{weight, count, dtype, master, {}, {}, {}}, dev_.default_stream());
}

std::size_t AdamW::add_moments(Parameter p, const Stream& s) {
  for (Buffer* moment : {&p.m, &p.v}) {
    *moment = alloc_.allocate(p.count * 4, MemTag::model_states);
    dev_.fill_zero(moment->data(), p.count * 4, s);
  }
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

void AdamW::update(std::size_t i, const void* grad, const Stream& s) { update(i, grad, params_.at(i).dtype, s); }

void AdamW::update(std::size_t i, const void* grad, DType grad_dtype, const Stream& s) {
  if (hyper_.step < 1) throw Error("AdamW: update() before the first next_step()");
  Parameter& p = params_.at(i);
  adam_step(dev_.exec(s), p.count, hyper_, p.master, p.m.as<float>(), p.v.as<float>(), grad, grad_dtype, p.weight, p.dtype);
}

const float* AdamW::master(std::size_t i) const { return params_.at(i).master; }

std::size_t AdamW::moment_bytes() const {
  std::size_t b = 0;
  for (const Parameter& p : params_) b += p.m.bytes() + p.v.bytes();
  return b;
}

std::size_t AdamW::master_bytes() const {
  std::size_t b = 0;
  for (const Parameter& p : params_) b += p.own_master.bytes();
  return b;
}

}  // namespace moebench
