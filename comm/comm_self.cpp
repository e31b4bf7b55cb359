// A world of one process: every collective is a copy of this rank's own data.
#include <cstring>
#include "comm/comm.h"

namespace moebench {

namespace {

class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string kind() const override { return "self"; }
  std::string link() const override { return "measured: memory copies (one rank)"; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    copy(recv, send, bytes_of(count, t), s);
  }
  void all_to_all_v(const void* send, const std::vector<std::size_t>& sc, const std::vector<std::size_t>& sd,
                    void* recv, const std::vector<std::size_t>& rc, const std::vector<std::size_t>& rd, DType t,
                    const Stream& s) override {
    if (sc.size() != 1 || rc.size() != 1 || sd.size() != 1 || rd.size() != 1 || sc[0] != rc[0])
      throw Error("all_to_all_v: counts must have one entry per rank and match");
    copy(static_cast<char*>(recv) + bytes_of(rd[0], t), static_cast<const char*>(send) + bytes_of(sd[0], t),
         bytes_of(sc[0], t), s);
  }
  void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp, const Stream& s) override {
    copy(recv, send, bytes_of(count, t), s);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    copy(recv, send, bytes_of(count, t), s);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t n, DType t, ReduceOp, const Stream& s) override {
    copy(recv, send, bytes_of(n, t), s);
  }
  void send(const void*, std::size_t, DType, int peer, const Stream&) override { self_peer(peer, "send"); }
  void recv(void*, std::size_t, DType, int peer, const Stream&) override { self_peer(peer, "recv"); }
  void send_recv(const void* send, int dst, void* recv, int src, std::size_t count, DType t, const Stream& s) override {
    if (dst != 0 || src != 0) throw Error("send_recv: peer out of range for a world of 1");
    copy(recv, send, bytes_of(count, t), s);
  }
  void barrier(const Stream&) override {}
  void wait(const Stream& s) override { s.synchronize(); }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SelfCommunicator>(); }
  std::unique_ptr<Communicator> dup() override { return std::make_unique<SelfCommunicator>(); }

 private:
  // CPU buffers, in the stream's order.
  static void copy(void* dst, const void* src, std::size_t bytes, const Stream& s) {
    if (bytes && dst != src) run_on(s, "self copy", [=] { std::memmove(dst, src, bytes); });
  }
  [[noreturn]] static void self_peer(int peer, const char* op) {
    throw Error(std::string(op) + " to peer " + std::to_string(peer) +
                ": a world of one rank has no peer to exchange with (use send_recv with itself)");
  }
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator() { return std::make_unique<SelfCommunicator>(); }

}  // namespace moebench
