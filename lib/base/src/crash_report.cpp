// The fatal-signal report (crash_report.hpp). Only async-signal-safe calls after the handler starts, except
// backtrace(), which is preloaded at install time so that it does not allocate in the handler.
#include "phub/base/crash_report.hpp"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace phub {
namespace {

const char* g_program = "phub";

void put(const char* s) noexcept { (void)!::write(STDERR_FILENO, s, std::strlen(s)); }

// Unsigned value in hexadecimal, without allocation.
void put_hex(unsigned long v) noexcept {
  char buf[2 + 2 * sizeof v + 1];
  char* p = buf + sizeof buf;
  *--p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  put(p);
}

void put_dec(int v) noexcept {
  char buf[16];
  char* p = buf + sizeof buf;
  *--p = '\0';
  unsigned u = v < 0 ? 0u - static_cast<unsigned>(v) : static_cast<unsigned>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  put(p);
}

[[maybe_unused]] void on_fatal(int sig, siginfo_t* info, void*) {
  char thread[16] = "?";
  (void)pthread_getname_np(pthread_self(), thread, sizeof thread);
  put(g_program);
  put(": fatal signal ");
  put_dec(sig);
  put(" (");
  put(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  put(") in thread '");
  put(thread);
  put("'");
  if (sig != SIGABRT && info != nullptr) {
    put(", fault address ");
    put_hex(reinterpret_cast<unsigned long>(info->si_addr));
  }
  put("; stack:\n");
  void* frames[48];
  const int n = backtrace(frames, 48);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND restored the default action: returning re-runs the faulting instruction (SIGSEGV, SIGBUS,
  // SIGILL, SIGFPE) and raise() covers the rest (SIGABRT from abort() does not return here anyway).
  if (sig == SIGABRT) (void)raise(sig);
}

}  // namespace

void install_crash_report(const char* program) noexcept {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)program;
#else
  g_program = program;
  void* warm[1];
  (void)backtrace(warm, 1);  // loads libgcc_s now, not inside the handler
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) (void)sigaction(sig, &sa, nullptr);
#endif
}

}  // namespace phub
