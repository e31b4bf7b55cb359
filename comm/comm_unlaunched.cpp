// The world a launch of N ranks would make, seen from rank 0 before anything is launched: a
// bench's --check-options validates its options against that many ranks (does --experts divide
// over them?) in one process. It carries nothing: validating communicates nothing, and any
// operation says so instead of pretending to run.
#include "comm/comm.h"

namespace moebench {

namespace {

class UnlaunchedWorld final : public Communicator {
 public:
  explicit UnlaunchedWorld(int ranks) : ranks_(ranks) {}
  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  std::string kind() const override { return "unlaunched"; }
  std::string link() const override { return "none: the ranks are not launched (--check-options)"; }

  void all_to_all(const void*, void*, std::size_t, DType, const Stream&) override { refuse("all_to_all"); }
  void all_to_all_v(const void*, const std::vector<std::size_t>&, const std::vector<std::size_t>&, void*,
                    const std::vector<std::size_t>&, const std::vector<std::size_t>&, DType, const Stream&) override {
    refuse("all_to_all_v");
  }
  void all_reduce(const void*, void*, std::size_t, DType, ReduceOp, const Stream&) override { refuse("all_reduce"); }
  void all_gather(const void*, void*, std::size_t, DType, const Stream&) override { refuse("all_gather"); }
  void reduce_scatter(const void*, void*, std::size_t, DType, ReduceOp, const Stream&) override { refuse("reduce_scatter"); }
  void send(const void*, std::size_t, DType, int, const Stream&) override { refuse("send"); }
  void recv(void*, std::size_t, DType, int, const Stream&) override { refuse("recv"); }
  void send_recv(const void*, int, void*, int, std::size_t, DType, const Stream&) override { refuse("send_recv"); }
  void barrier(const Stream&) override { refuse("barrier"); }
  void wait(const Stream&) override { refuse("wait"); }
  std::unique_ptr<Communicator> split(int, int) override { refuse("split"); }
  std::unique_ptr<Communicator> dup() override { refuse("dup"); }

 private:
  [[noreturn]] static void refuse(const char* op) {
    throw Error(std::string(op) + ": the ranks are not launched; checking the options (--check-options) communicates nothing");
  }
  int ranks_;
};

}  // namespace

std::unique_ptr<Communicator> make_unlaunched_world(int ranks) {
  if (ranks < 1) throw Error("make_unlaunched_world: ranks must be positive, got " + std::to_string(ranks));
  return std::make_unique<UnlaunchedWorld>(ranks);
}

}  // namespace moebench
