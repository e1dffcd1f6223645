// The fatal-signal report: a child process that faults prints its program name, the signal, the thread and
// a stack to stderr, and still dies of the signal (so a core file and the exit status stay as they were).
// In a sanitizer build the handler is not installed, and the sanitizer's own report must still appear.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "phub/base/crash_report.hpp"

namespace {

struct Death {
  int status = 0;
  std::string stderr_text;
};

// Runs `fault` in a forked child with the report installed; returns how it ended and what it printed.
template <typename Fault>
Death run_child(Fault fault) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    (void)dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    phub::install_crash_report("crash-test");
    fault();
    _exit(0);
  }
  close(fds[1]);
  Death d;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) d.stderr_text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  EXPECT_EQ(waitpid(pid, &d.status, 0), pid);
  return d;
}

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

TEST(CrashReport, ASegfaultNamesItselfAndTheStackAndStillDiesOfTheSignal) {
  // A store to a page mapped without access: a real SIGSEGV at a known address, and not undefined behaviour
  // that UBSan would report first (as it does a store through a null pointer).
  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  const Death d = run_child([page] { *static_cast<volatile int*>(page) = 1; });
  munmap(page, 4096);
  if (sanitized()) {
    EXPECT_NE(d.stderr_text.find("AddressSanitizer"), std::string::npos) << d.stderr_text;
    EXPECT_EQ(d.stderr_text.find("crash-test: fatal signal"), std::string::npos) << d.stderr_text;
    return;
  }
  char where[64];
  std::snprintf(where, sizeof where, ", fault address %p; stack:\n", page);
  ASSERT_TRUE(WIFSIGNALED(d.status)) << d.status;
  EXPECT_EQ(WTERMSIG(d.status), SIGSEGV);
  EXPECT_NE(d.stderr_text.find("crash-test: fatal signal 11 (SEGV) in thread '"), std::string::npos) << d.stderr_text;
  EXPECT_NE(d.stderr_text.find(where), std::string::npos) << where << " in: " << d.stderr_text;
  EXPECT_NE(d.stderr_text.find("test-base"), std::string::npos) << "no frame of this binary: " << d.stderr_text;
}

TEST(CrashReport, AnAbortIsReportedWithoutAFaultAddress) {
  const Death d = run_child([] { std::abort(); });
  ASSERT_TRUE(WIFSIGNALED(d.status)) << d.status;
  EXPECT_EQ(WTERMSIG(d.status), SIGABRT);
  if (sanitized()) return;  // abort() is not a sanitizer report; the default action is all that is checked
  EXPECT_NE(d.stderr_text.find("crash-test: fatal signal 6 (ABRT)"), std::string::npos) << d.stderr_text;
  EXPECT_EQ(d.stderr_text.find("fault address"), std::string::npos) << d.stderr_text;
}

}  // namespace
