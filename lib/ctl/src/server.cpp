// The control socket's server: connections, bounded reads and writes, deadlines, answers from the Handler.
#include "phub/ctl/server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

#include "listen_socket.hpp"
#include "phub/ctl/command.hpp"
#include "phub/ctl/line_buffer.hpp"
#include "phub/ctl/protocol.hpp"
#include "phub/base/unique_fd.hpp"

namespace phub::ctl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kListenBacklog = 64;
constexpr size_t kMaxAcceptsPerPoll = 64;
constexpr size_t kMaxAnswersPerPoll = 8;  // a client's pipelined requests wait their turn after 8
constexpr std::chrono::milliseconds kAcceptPauseAfterError{100};  // out of descriptors: retry later

// One connection. It reads a request, writes its answer, and only then reads the next request: a
// client holds at most one request line and one answer, and one that does not read its answers
// stops being read until its answer timeout closes it.
struct Client {
  Client(UniqueFd f, Clock::time_point request_deadline) : fd(std::move(f)), deadline(request_deadline) {}

  UniqueFd fd;
  LineBuffer input;
  std::string output;
  size_t output_sent = 0;
  bool writing = false;       // an answer is under way
  bool last_answer = false;   // close once it is written
  bool peer_closed = false;   // the client sent end of file
  bool gone = false;          // closed; removed at the end of poll_once
  Clock::time_point deadline;  // for the request being read, or for the answer being written
};

Reply refusal(const std::string& why) { return Reply::failure(why + "; closing the connection\n"); }

}  // namespace

struct ControlServer::Impl {
  Impl(Handler& h, ServerLimits l, ListenSocket s) : handler(h), limits(l), listener(std::move(s)) {}

  void poll_once(std::chrono::milliseconds timeout);
  int wait_ms(std::chrono::milliseconds timeout, Clock::time_point now);
  void accept_clients(Clock::time_point now);
  void reap(Clock::time_point now);
  void refuse(const UniqueFd& fd);
  void serve(Client& c, short revents, Clock::time_point now);
  void read_some(Client& c);
  void answer_lines(Client& c, Clock::time_point now);
  void start_answer(Client& c, const Reply& reply, bool last, Clock::time_point now);
  void flush(Client& c, Clock::time_point now);
  void expire(Client& c, Clock::time_point now);
  void drop(Client& c, bool lost);
  void remove_gone();

  Handler& handler;
  ServerLimits limits;
  ListenSocket listener;
  ServerCounters counters;
  std::vector<std::unique_ptr<Client>> clients;
  Clock::time_point accept_resume{};  // accept again from then on (after running out of descriptors)
};

void ControlServer::Impl::poll_once(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  fds.reserve(clients.size() + 1);
  const bool accepting = Clock::now() >= accept_resume;
  fds.push_back(pollfd{accepting ? listener.fd() : -1, POLLIN, 0});
  for (auto& c : clients) {
    short events = 0;
    if (c->writing) {
      events = POLLOUT;
    } else if (!c->peer_closed && !c->input.has_line()) {
      events = POLLIN;
    }
    fds.push_back(pollfd{c->fd.get(), events, 0});
  }
  const int ready = ::poll(fds.data(), fds.size(), wait_ms(timeout, Clock::now()));
  const auto now = Clock::now();
  const size_t polled = clients.size();
  for (size_t i = 0; i < polled; ++i) serve(*clients[i], ready > 0 ? fds[i + 1].revents : 0, now);
  for (auto& c : clients) {
    const auto t = Clock::now();  // the handler may have run for a while
    if (!c->gone && t >= c->deadline) expire(*c, t);
  }
  remove_gone();  // before accepting: a client that just left frees its place
  if (ready > 0 && (fds[0].revents & POLLIN)) {
    accept_clients(Clock::now());
    remove_gone();
  }
}

void ControlServer::Impl::remove_gone() {
  std::erase_if(clients, [](const std::unique_ptr<Client>& c) { return c->gone; });
}

// The wait: the caller's timeout, shortened to the nearest deadline, zero if a request is waiting.
int ControlServer::Impl::wait_ms(std::chrono::milliseconds timeout, Clock::time_point now) {
  auto wait = std::max(timeout, std::chrono::milliseconds(0));
  for (auto& c : clients) {
    if (!c->writing && c->input.has_line()) return 0;
    wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(std::max(c->deadline - now, Clock::duration(0))));
  }
  if (now < accept_resume) wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(accept_resume - now));
  return static_cast<int>(std::min<int64_t>(wait.count(), INT_MAX));
}

void ControlServer::Impl::accept_clients(Clock::time_point now) {
  for (size_t n = 0; n < kMaxAcceptsPerPoll; ++n) {
    UniqueFd fd(::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_resume = now + kAcceptPauseAfterError;
      }
      return;
    }
    if (clients.size() >= limits.max_clients) reap(now);
    if (clients.size() >= limits.max_clients) {
      refuse(fd);
      continue;
    }
    ++counters.clients_accepted;
    clients.push_back(std::make_unique<Client>(std::move(fd), now + limits.request_timeout));
    serve(*clients.back(), POLLIN, now);  // its request may be there already
  }
}

// At the limit, a client that has left but was not polled since still holds a place: read every
// client once (a read that finds end of file closes it) and count again.
void ControlServer::Impl::reap(Clock::time_point now) {
  for (auto& c : clients) serve(*c, POLLIN, now);
  remove_gone();
}

void ControlServer::Impl::refuse(const UniqueFd& fd) {
  ++counters.clients_refused;
  const std::string answer =
      format_answer(refusal("too many control clients (" + std::to_string(limits.max_clients) + "); try again"));
  (void)::send(fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void ControlServer::Impl::serve(Client& c, short revents, Clock::time_point now) {
  if (c.gone) return;
  if (c.writing) {
    if (revents & (POLLOUT | POLLERR | POLLHUP)) flush(c, now);
    if (c.gone || c.writing) return;
  }
  if ((revents & (POLLIN | POLLERR | POLLHUP)) && !c.peer_closed && !c.input.has_line()) read_some(c);
  if (!c.gone) answer_lines(c, now);
}

// One bounded read: at most the room left in the line buffer.
void ControlServer::Impl::read_some(Client& c) {
  const auto room = c.input.free_space();
  const ssize_t n = ::recv(c.fd.get(), room.data(), room.size(), MSG_DONTWAIT);
  if (n > 0) {
    c.input.commit(static_cast<size_t>(n));
  } else if (n == 0) {
    c.peer_closed = true;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    drop(c, true);
  }
}

void ControlServer::Impl::answer_lines(Client& c, Clock::time_point now) {
  for (size_t n = 0; n < kMaxAnswersPerPoll && !c.writing && !c.gone; ++n) {
    auto line = c.input.take_line();
    if (!line) break;
    const Reply reply = answer_request(*line, handler);
    ++counters.requests;
    if (!reply.ok) ++counters.requests_failed;
    now = Clock::now();  // the handler may have taken a while
    start_answer(c, reply, false, now);
  }
  if (c.writing || c.gone) return;
  if (c.input.too_long()) {
    ++counters.requests_too_long;
    start_answer(c, refusal("request longer than " + std::to_string(kMaxRequestBytes) + " bytes (newline included)"),
                 true, now);
  } else if (c.peer_closed && !c.input.has_line()) {
    drop(c, c.input.held_bytes() > 0);  // a line cut off by the disconnect is never executed
  }
}

void ControlServer::Impl::start_answer(Client& c, const Reply& reply, bool last, Clock::time_point now) {
  c.output = format_answer(reply);
  c.output_sent = 0;
  c.writing = true;
  c.last_answer = last;
  c.deadline = now + limits.answer_timeout;
  flush(c, now);
}

// Writes what the socket takes now; when the answer is out, the next request's clock starts.
void ControlServer::Impl::flush(Client& c, Clock::time_point now) {
  while (c.output_sent < c.output.size()) {
    const ssize_t n = ::send(c.fd.get(), c.output.data() + c.output_sent, c.output.size() - c.output_sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.output_sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      drop(c, true);
      return;
    }
  }
  std::string().swap(c.output);  // a large answer's memory goes back now
  c.writing = false;
  if (c.last_answer) {
    drop(c, false);
    return;
  }
  c.deadline = now + limits.request_timeout;
}

void ControlServer::Impl::expire(Client& c, Clock::time_point now) {
  // What arrived or drained while a slow handler kept the loop busy counts: one more try first.
  serve(c, POLLIN | POLLOUT, now);
  if (c.gone || now < c.deadline) return;
  if (c.writing) {
    ++counters.answer_timeouts;
    drop(c, false);
    return;
  }
  ++counters.request_timeouts;
  start_answer(c, refusal("no complete request within " + std::to_string(limits.request_timeout.count()) + " ms"),
               true, now);
}

void ControlServer::Impl::drop(Client& c, bool lost) {
  c.fd.reset();
  c.gone = true;
  if (lost) ++counters.clients_lost;
}

Expected<std::unique_ptr<ControlServer>, std::string> ControlServer::open(const std::string& path, Handler& handler,
                                                                          ServerLimits limits) {
  auto listener = ListenSocket::open(path, kListenBacklog);
  if (!listener) return unexpected(listener.error());
  auto impl = std::make_unique<Impl>(handler, limits, std::move(*listener));
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControlServer::~ControlServer() = default;

void ControlServer::poll_once(std::chrono::milliseconds timeout) { impl_->poll_once(timeout); }
const std::string& ControlServer::path() const { return impl_->listener.path(); }
size_t ControlServer::client_count() const { return impl_->clients.size(); }
const ServerCounters& ControlServer::counters() const { return impl_->counters; }

}  // namespace phub::ctl
