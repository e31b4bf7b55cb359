// An NVTX injection library for tests: loaded through NVTX_INJECTION64_PATH, it records every
// range pushed and popped in the "moebench" domain, one line per event, to the file named by
// MOEBENCH_NVTX_RECORD ("push <thread> <depth> <name>" / "pop <thread> <depth>"), so a test can
// check the ranges a run emits without Nsight Systems (which none of our machines has).
#include <nvtx3/nvToolsExt.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace {

std::FILE* out = nullptr;
std::mutex out_mutex;
thread_local int depth = 0;
char moebench_domain_tag;  // the handle we hand out for the "moebench" domain
char other_domain_tag;

unsigned long thread_id() { return static_cast<unsigned long>(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000); }

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(std::strcmp(name, "moebench") == 0 ? &moebench_domain_tag : &other_domain_tag);
}

int NVTX_API range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  if (reinterpret_cast<char*>(domain) != &moebench_domain_tag) return 0;
  const char* name = attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII ? attr->message.ascii : "?";
  std::lock_guard<std::mutex> lock(out_mutex);
  std::fprintf(out, "push %lu %d %s\n", thread_id(), depth, name);
  return depth++;
}

int NVTX_API range_pop(nvtxDomainHandle_t domain) {
  if (reinterpret_cast<char*>(domain) != &moebench_domain_tag) return 0;
  std::lock_guard<std::mutex> lock(out_mutex);
  --depth;
  std::fprintf(out, "pop %lu %d\n", thread_id(), depth);
  std::fflush(out);
  return depth;
}

}  // namespace

extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const char* path = std::getenv("MOEBENCH_NVTX_RECORD");
  if (!path || !(out = std::fopen(path, "w"))) return 0;
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || size <= NVTX_CBID_CORE2_DomainCreateA)
    return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(domain_create);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(range_push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(range_pop);
  return 1;
}
