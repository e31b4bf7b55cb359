#include "runtime/peer_probe.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <thread>

namespace moebench {
namespace {

constexpr char kAsk = '?', kAnswer = '!';

struct ProbeState {
  std::mutex mu;
  int self = -1;
  std::vector<PeerAddress> peers;
  std::string published;
  bool listening = false;
};

ProbeState& probe_state() {
  static ProbeState* s = new ProbeState;  // never destroyed: the watchdog may ask after static destructors
  return *s;
}

// Answers every connection's question, one at a time: a question is a byte, its answer a byte.
void answer(int listener) {
  for (;;) {
    const int c = ::accept(listener, nullptr, nullptr);
    if (c < 0) continue;
    char byte = 0;
    pollfd p{c, POLLIN, 0};
    if (::poll(&p, 1, 1000) == 1 && ::read(c, &byte, 1) == 1 && byte == kAsk)
      (void)!::send(c, &kAnswer, 1, MSG_NOSIGNAL);  // an asker gone away is no reason to die
    ::close(c);
  }
}

std::vector<std::string> own_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    out.emplace_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

struct Attempt {
  int peer = 0;  // index into the table
  int fd = -1;
  bool asked = false;
};

int start_connect(const std::string& address, int port) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(std::uint16_t(port));
  if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string PeerProbe::listen() {
  ProbeState& s = probe_state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.listening) return s.published;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof any;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&any), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return "";
  }
  std::thread(answer, fd).detach();
  std::ostringstream text;
  text << ntohs(any.sin_port);
  for (const std::string& a : own_addresses()) text << ' ' << a;
  s.listening = true;
  s.published = text.str();
  return s.published;
}

PeerAddress PeerProbe::parse(int rank, const std::string& host, const std::string& text) {
  PeerAddress p;
  p.rank = rank;
  p.host = host;
  std::istringstream in(text);
  in >> p.port;
  for (std::string a; in >> a;) p.addresses.push_back(a);
  return p;
}

void PeerProbe::set_peers(int self, std::vector<PeerAddress> peers) {
  ProbeState& s = probe_state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.self = self;
  s.peers = std::move(peers);
}

bool PeerProbe::has_peers() {
  ProbeState& s = probe_state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.peers.size() > 1;
}

std::string PeerProbe::silent_peers(double seconds) {
  ProbeState& s = probe_state();
  std::vector<PeerAddress> peers;
  std::string own_host;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    peers = s.peers;
    for (const PeerAddress& p : peers)
      if (p.rank == s.self) own_host = p.host;
    peers.erase(std::remove_if(peers.begin(), peers.end(), [&](const PeerAddress& p) { return p.rank == s.self; }),
                peers.end());
  }
  if (peers.empty()) return "";
  // Every address of every peer at once; a peer answers when one of its connections does.
  std::vector<Attempt> attempts;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].port <= 0) continue;
    std::vector<std::string> to = peers[i].addresses;
    if (peers[i].host == own_host) to.insert(to.begin(), "127.0.0.1");
    for (const std::string& a : to)
      if (const int fd = start_connect(a, peers[i].port); fd >= 0) attempts.push_back({int(i), fd, false});
  }
  std::vector<bool> answered(peers.size(), false);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    for (std::size_t k = 0; k < attempts.size(); ++k)
      if (attempts[k].fd >= 0 && !answered[std::size_t(attempts[k].peer)]) {
        fds.push_back({attempts[k].fd, short(attempts[k].asked ? POLLIN : POLLOUT), 0});
        which.push_back(k);
      }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (fds.empty() || left.count() <= 0) break;
    if (::poll(fds.data(), fds.size(), int(left.count())) <= 0) break;
    for (std::size_t j = 0; j < fds.size(); ++j) {
      Attempt& at = attempts[which[j]];
      if (!fds[j].revents) continue;
      char byte = 0;
      int error = 0;
      socklen_t len = sizeof error;
      const bool failed = (fds[j].revents & (POLLERR | POLLHUP)) ||
                          (!at.asked && (::getsockopt(at.fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0));
      // MSG_NOSIGNAL: a peer whose node died may reset the connection between the check above and
      // this write, and SIGPIPE would end the rank before it says which peers do not answer.
      if (!failed && !at.asked && ::send(at.fd, &kAsk, 1, MSG_NOSIGNAL) == 1) {
        at.asked = true;
        continue;
      }
      if (!failed && at.asked && ::read(at.fd, &byte, 1) == 1 && byte == kAnswer) answered[std::size_t(at.peer)] = true;
      ::close(at.fd);
      at.fd = -1;
    }
  }
  for (Attempt& at : attempts)
    if (at.fd >= 0) ::close(at.fd);
  // "rank 2 on mb-node2", "ranks 2, 3 on mb-node2; rank 5 on mb-node3": hosts in rank order.
  std::vector<std::pair<std::string, std::vector<int>>> by_host;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (answered[i]) continue;
    auto at = std::find_if(by_host.begin(), by_host.end(), [&](const auto& h) { return h.first == peers[i].host; });
    if (at == by_host.end()) at = by_host.insert(by_host.end(), {peers[i].host, {}});
    at->second.push_back(peers[i].rank);
  }
  constexpr std::size_t kNamed = 8;
  std::string out;
  for (std::size_t h = 0; h < by_host.size() && h < kNamed; ++h) {
    const std::vector<int>& ranks = by_host[h].second;
    out += (h ? "; " : "") + std::string(ranks.size() > 1 ? "ranks " : "rank ");
    for (std::size_t r = 0; r < ranks.size() && r < kNamed; ++r) out += (r ? ", " : "") + std::to_string(ranks[r]);
    if (ranks.size() > kNamed) out += " and " + std::to_string(ranks.size() - kNamed) + " more";
    out += " on " + by_host[h].first;
  }
  if (by_host.size() > kNamed) out += "; and ranks on " + std::to_string(by_host.size() - kNamed) + " more hosts";
  return out;
}

}  // namespace moebench
