// Removing a process's own EAL runtime directory (/var/run/dpdk/<file-prefix>) at exit: DPDK 22.11's
// rte_eal_cleanup leaves it and its files behind, and every test run would add one more.
#pragma once

#include <string_view>

#include "phub/base/expected.hpp"

namespace phub::drivers {

// Removes kDpdkRuntimeRoot/<prefix> (phub/base/eal_args.hpp) and everything in it, never following a
// symbolic link: the directory itself must be a real directory (a link there is refused and left), and a
// link inside it is removed as a link, never what it points to. `prefix` must be one plain path component.
// Succeeds when the directory is gone (also when it was never there); the error names the path and why.
[[nodiscard]] Expected<void, std::string> remove_runtime_dir(std::string_view prefix);

}  // namespace phub::drivers
