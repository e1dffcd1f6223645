// A fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) prints one line naming it and the thread, and the
// thread's stack as return addresses, to stderr, then takes the signal's default action (a core file where
// the system keeps them). Under systemd that lands in the journal: a crash on a box without core files still
// says where it happened (resolve the addresses with `addr2line -e BINARY -f -C +OFFSET`).
#pragma once

namespace phub {

// Installs the handler for the whole process; `program` names it in the first line. Does nothing in a
// sanitizer build, whose own report is better.
void install_crash_report(const char* program) noexcept;

}  // namespace phub
