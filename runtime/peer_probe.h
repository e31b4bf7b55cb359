// Which peer ranks still answer, asked when a wait on them has run out (runtime/watchdog.h), so
// that the line that ends the job names the rank and the host that stopped answering, not only
// the operation. Each rank answers on a TCP port of its own from a thread of its own: a rank
// whose process is stopped or killed, or whose node is dead or cut off, does not answer; a rank
// that waits in the same collective does. The ports and addresses are exchanged at start-up
// (runtime/runtime.cpp), over MPI, while every rank is alive.
#pragma once
#include <string>
#include <vector>

namespace moebench {

struct PeerAddress {
  int rank = 0;
  std::string host;                    // its hostname
  std::vector<std::string> addresses;  // its IPv4 addresses (loopback tried only on its own host)
  int port = 0;
};

class PeerProbe {
 public:
  // Starts this process's answering thread (once); returns this rank's entry for the others, as
  // text ("" where no socket could be opened: then the probe names no one).
  static std::string listen();
  static PeerAddress parse(int rank, const std::string& host, const std::string& text);
  // The table every rank published, and which of them is this one.
  static void set_peers(int self, std::vector<PeerAddress> peers);
  // Whether there are peers to ask (a table of more than this rank).
  static bool has_peers();
  // The peers that do not answer within `seconds`, as "rank 2 on mb-node2 and rank 3 on mb-node2";
  // "" where all answer or there is no table.
  static std::string silent_peers(double seconds);
};

}  // namespace moebench
