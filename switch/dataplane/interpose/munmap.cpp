// munmap, interposed in agq-switch and agq-worker (only: the CMake function
// agq_guard_port_unmaps links this file into an executable). Every munmap
// of the process -- DPDK's, linked into the executable or loaded as a
// plugin, and our own -- first waits for the port readers
// (port_readers.hpp: why), then unmaps through the next definition (libc's,
// or a sanitizer's interceptor). Kept out of agq_dataplane: a library loaded
// into another program (the Python module) must not replace its munmap.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "dataplane/port_readers.hpp"

namespace {

using MunmapFn = int (*)(void*, size_t) noexcept;
std::atomic<MunmapFn> g_next{nullptr};

// Resolved before main, from a constructor, so the first munmap never runs
// dlsym; anything earlier unmaps with the system call itself.
__attribute__((constructor)) void resolve_next_munmap() {
  g_next.store(reinterpret_cast<MunmapFn>(dlsym(RTLD_NEXT, "munmap")), std::memory_order_release);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int munmap(void* addr, size_t len) noexcept {
  agq::dataplane::wait_for_port_readers();
  if (MunmapFn next = g_next.load(std::memory_order_acquire)) return next(addr, len);
  return int(syscall(SYS_munmap, addr, len));
}
