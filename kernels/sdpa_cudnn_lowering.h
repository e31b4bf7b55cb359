// The attention graphs (kernels/sdpa_graph.h) as cuDNN backend descriptors, and the engine
// configurations cuDNN's heuristics offer for them: shared by the execution plans that run on a
// GPU (kernels/sdpa_cudnn.cpp) and the deviceless check of which engines take a graph
// (kernels/sdpa_cudnn_deviceless.cpp).
#pragma once
#include <cudnn.h>
#include <memory>
#include <string>
#include <vector>
#include "kernels/sdpa_graph.h"

namespace moebench::cudnn_backend {

// cuDNN's last error message, in parentheses, or "".
std::string last_error();
void check(cudnnStatus_t s, const char* call);

class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) { check(cudnnBackendCreateDescriptor(type, &d_), "create descriptor"); }
  ~Descriptor() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, std::int64_t n = 1) {
    check(cudnnBackendSetAttribute(d_, name, type, n, values), "set attribute");
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& d) { set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &d.d_); }
  void finalize(const std::string& what) { check(cudnnBackendFinalize(d_), what.c_str()); }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using Owned = std::unique_ptr<Descriptor>;

// A graph's descriptors: its tensors', its ops' (and their parameters'), and the finalized
// operation graph, which refers to them all.
struct Lowered {
  std::vector<Owned> tensors, ops;
  Owned graph;
};
// `handle`: the cuDNN handle plans will run on; nullptr for a deviceless graph.
Lowered lower(const SdpaGraph& g, cudnnHandle_t handle);

// The engine configurations heuristics `mode` offers for `l`, best first, on the device of the
// handle it was lowered with or, deviceless, the one `device` describes. Empty when there are
// none; `tried` then says why.
std::vector<Owned> engine_configs(const Lowered& l, cudnnBackendHeurMode_t mode, const Descriptor* device, std::string& tried);
// The global index of a configuration's engine.
long long engine_index(const Descriptor& config);

}  // namespace moebench::cudnn_backend
