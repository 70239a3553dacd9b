// _agq: the Python face of libagq's Client (pybind11). Arrays in, integer
// operation ids out; a completion thread on the Python side (agq_torch)
// turns completions into torch Futures. Python objects never reach the poll
// thread: the Python side keeps the arrays alive until their operation
// completed, and every wait here releases the GIL.
#include <arpa/inet.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <string>

#include "dataplane/port_readers.hpp"
#include "libagq/client.hpp"

namespace py = pybind11;
using namespace agq::libagq;

namespace {

uint32_t parse_ip(const std::string& s, const char* what) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) throw py::value_error(std::string(what) + ": not an IPv4 address: " + s);
  return ntohl(a.s_addr);
}

agq::proto::Mac parse_mac(const std::string& s, const char* what) {
  agq::proto::Mac m{};
  unsigned b[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
    throw py::value_error(std::string(what) + ": not a MAC address: " + s);
  for (int i = 0; i < 6; ++i) m[i] = uint8_t(b[i]);
  return m;
}

// A float32, C-contiguous array as a span; a clear error for anything else.
template <typename T>
std::span<T> f32_span(const py::array& a, const char* what, bool writable) {
  if (!a.dtype().is(py::dtype::of<float>()))
    throw py::type_error(std::string("agq allreduce: ") + what + " must be float32, got " +
                         std::string(py::str(a.dtype())));
  if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string("agq allreduce: ") + what + " must be contiguous");
  if (writable && !a.writeable()) throw py::value_error(std::string("agq allreduce: ") + what + " is read-only");
  return {static_cast<T*>(const_cast<void*>(a.data())), size_t(a.size())};
}

py::dict stats_dict(const OpStats& st) {
  const agq::worker::OpStats& s = st.engine;
  py::dict d;
  d["elements"] = st.elements;
  d["chunks"] = s.chunks;
  d["retransmissions"] = s.retransmissions;
  d["overflows"] = s.overflows;                  // RESULTs with OVERFLOW (some worker clipped)
  d["redos"] = s.redos;                          // chunks sent again with e + 2
  d["overflow_accepted"] = s.clipped_chunks;     // still clipped after the redos (bound infinite)
  d["fallbacks"] = s.fallbacks;                  // summed by the PS
  d["duplicates"] = s.duplicates;
  uint64_t req_n = 0, req_bits = 0;
  for (int i = 0; i <= 8; ++i) {
    req_n += s.req_hist[i];
    req_bits += s.req_hist[i] * uint64_t(4 * i);
  }
  d["avg_req_bits"] = req_n ? double(req_bits) / double(req_n) : 0.0;
  d["avg_granted_bits"] = s.avg_granted_bits();  // over chunks aggregated in the switch
  py::dict h;
  if (s.fallbacks) h[py::int_(0)] = s.fallbacks;  // key 0: fallback to the PS
  for (int i = 1; i <= 8; ++i)
    if (s.granted_hist[i]) h[py::int_(4 * i)] = s.granted_hist[i];
  d["granted_widths"] = h;
  d["max_bound"] = s.error_bound;
  d["seconds"] = st.seconds;
  return d;
}

struct PyClient {
  std::unique_ptr<Client> c;

  uint64_t submit(py::array in, py::array out, float scale, uint32_t tag, std::optional<py::array> bound) {
    auto i = f32_span<const float>(in, "input", false);
    auto o = f32_span<float>(out, "output", true);
    std::span<float> b;
    if (bound) b = f32_span<float>(*bound, "bound", true);
    Future f;
    {
      py::gil_scoped_release nogil;  // the NaN/Inf scan is O(n)
      f = c->allreduce(i, o, scale, tag, b);
    }
    return f.handle()->id;
  }

  py::list take_completed(double timeout_s) {
    std::vector<std::shared_ptr<OpHandle>> v;
    {
      py::gil_scoped_release nogil;
      v = c->take_completed(timeout_s);
    }
    py::list out;
    for (auto& h : v) out.append(py::make_tuple(h->id, h->ok, h->error, stats_dict(h->stats)));
    return out;
  }

  void close() {
    py::gil_scoped_release nogil;
    c->close();
  }
};

}  // namespace

PYBIND11_MODULE(_agq, m) {
  m.doc() = "libagq: allreduce of float32 arrays through an agq-switch (see workers/libagq/client.hpp)";
  py::register_exception<ClientError>(m, "ClientError", PyExc_RuntimeError);
  py::class_<PyClient>(m, "Client")
      .def(py::init([](const std::string& vdev, uint16_t job_id, unsigned num_workers, unsigned worker_id,
                       uint32_t slots, uint32_t rows, int lanes, int max_width, const std::string& self_ip,
                       const std::string& self_mac, const std::string& ps_ip, const std::string& ps_mac,
                       const std::string& file_prefix, int mem_mb, double connect_timeout, uint32_t idle_sleep_us,
                       int init_width, double init_scale, double error_budget, double margin, double rto_ms,
                       double rto_max_ms, unsigned max_retries, double reply_timeout, uint32_t window, int row_shift,
                       bool error_feedback, int min_width_slack, int fixed_width) {
             ClientOptions o;
             o.vdev = vdev;
             o.file_prefix = file_prefix;
             o.mem_mb = mem_mb;
             o.connect_timeout_s = connect_timeout;
             o.idle_sleep_us = idle_sleep_us;
             o.completion_queue = true;
             JobParams& j = o.job;
             if (num_workers > 32 || worker_id > 255 || lanes > 255 || max_width > 255 || row_shift > 16)
               throw py::value_error("workers must be <= 32, row_shift <= 16");
             j.job.job_id = job_id;
             j.job.num_workers = uint8_t(num_workers);
             j.worker_id = worker_id;
             j.job.slots = slots;
             j.job.window = window;
             j.job.row_shift = row_shift >= 0 ? uint8_t(row_shift) : agq::worker::AllreduceJob::row_shift_for(slots, rows);
             j.job.lanes = uint8_t(lanes);
             j.job.max_width = uint8_t(max_width);
             if (!self_ip.empty()) j.self = {parse_mac(self_mac, "self_mac"), parse_ip(self_ip, "self_ip")};
             if (!ps_ip.empty()) j.ps = {parse_mac(ps_mac, "ps_mac"), parse_ip(ps_ip, "ps_ip")};
             agq::worker::AllreduceTuning& t = o.tuning;
             t.init_width = init_width;
             t.init_scale = init_scale;
             t.error_budget = error_budget;
             t.margin = margin;
             t.rto_init_ns = uint64_t(rto_ms * 1e6);
             t.rto_max_ns = uint64_t(rto_max_ms * 1e6);
             t.max_retries = max_retries;
             t.reply_timeout_ns = uint64_t(reply_timeout * 1e9);
             t.error_feedback = error_feedback;
             t.min_width_slack = min_width_slack;
             t.fixed_width = fixed_width;
             PyClient p;
             {
               py::gil_scoped_release nogil;  // memif connect waits up to connect_timeout
               p.c = Client::open(o);
             }
             return p;
           }),
           py::arg("vdev"), py::arg("job_id"), py::arg("num_workers"), py::arg("worker_id"), py::arg("slots"),
           py::arg("rows") = 0, py::arg("lanes") = 32, py::arg("max_width") = 32, py::arg("self_ip") = "",
           py::arg("self_mac") = "", py::arg("ps_ip") = "", py::arg("ps_mac") = "", py::arg("file_prefix") = "",
           py::arg("mem_mb") = 128, py::arg("connect_timeout") = 5.0, py::arg("idle_sleep_us") = 200,
           py::arg("init_width") = 32, py::arg("init_scale") = 16.0, py::arg("error_budget") = 1e-4,
           py::arg("margin") = 4.0, py::arg("rto_ms") = 20.0, py::arg("rto_max_ms") = 640.0,
           py::arg("max_retries") = 25, py::arg("reply_timeout") = 5.0, py::arg("window") = 0, py::arg("row_shift") = -1,
           py::arg("error_feedback") = true, py::arg("min_width_slack") = 0, py::arg("fixed_width") = 0)
      .def("submit", &PyClient::submit, py::arg("input"), py::arg("output"), py::arg("scale") = 1.0f,
           py::arg("tag") = 0, py::arg("bound") = py::none(),
           "Queues sum(input over workers) * scale -> output; returns the operation id. Keep the arrays alive "
           "and untouched until take_completed() returned that id.")
      .def("take_completed", &PyClient::take_completed, py::arg("timeout") = 0.1,
           "[(id, ok, error, stats)] of the operations completed since the last call (waits up to timeout s)")
      .def("diagnostic", [](PyClient& p) { return p.c->diagnostic(); })
      .def("close", &PyClient::close);
  // python/unmap_wrap.cpp. `guarded`: DPDK's unmaps of port memory wait for
  // the poll thread (DPDK linked into the module); the figures count those
  // waits since the module was loaded.
  m.def("unmap_guard", [] {
    const auto w = agq::dataplane::port_reader_waits();
    py::dict d;
#ifdef AGQ_UNMAP_WRAP
    d["guarded"] = true;
#else
    d["guarded"] = false;
#endif
    d["waited"] = w.waited;
    d["gave_up"] = w.gave_up;
    d["longest_us"] = w.longest_us;
    return d;
  });
}
