// The Python module's guard of port-memory unmaps (pitfall P7,
// dataplane/port_readers.hpp). agq-switch and agq-worker interpose munmap by
// defining it in the executable (switch/dataplane/interpose/munmap.cpp); a
// Python extension cannot: python3 and libc come first in the lookup scope,
// so DPDK's calls would reach libc's munmap and the memif PMD could unmap a
// ring the Client's poll thread is reading when the switch goes away. Here
// DPDK is linked into the module itself (its static archives) with
// -Wl,--wrap=munmap: the drivers' references to munmap are bound at link time
// to __wrap_munmap below, which first waits for the port readers (the poll
// thread reports a quiescent state every round, app/link_watch.hpp) and then
// unmaps through libc. The Python process's own munmaps are not touched.
#include <cstddef>

#include "dataplane/port_readers.hpp"

extern "C" int __real_munmap(void* addr, size_t len) noexcept;

extern "C" __attribute__((used)) int __wrap_munmap(void* addr, size_t len) noexcept {
  agq::dataplane::wait_for_port_readers();
  return __real_munmap(addr, len);
}
