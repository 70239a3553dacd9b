// Multicast replicas made from the original frames, member after member
// (SwitchDataplane::replicate_in_place; docs/ARCHITECTURE.md, "Multicast"),
// apart from ports and programs so that a test can drive it with a port of
// its own making. For each member r in turn: every frame is rewritten for
// r and lent to r's port for the send (FrameLender: the port's free hands
// it back), and, handed back -- the driver copied it out inside tx_burst
// -- it is ours alone to rewrite for r+1; the last member's send gives the
// frames away. Being handed back is the whole safety argument: a frame the
// port still holds after the send (a DMA queue, a zero-copy memif client,
// a ring of mbuf pointers) is never written again -- the members left get
// a buffer of its bytes instead, and the caller stops reusing on that
// port.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

#include "dataplane/frame_lender.hpp"

namespace agq::dataplane {

struct ReplicaPassStats {
  uint64_t sent = 0;     // replicas the ports took
  uint64_t refused = 0;  // replicas a full tx queue refused (lost, as a tail drop)
  uint64_t reused = 0;   // replicas made from the original frame (every member's but the last)
  uint64_t held = 0;     // frames a port kept past its send
  uint64_t copies = 0;   // buffers those frames' later members got
  uint64_t lost = 0;     // later replicas of held frames that found no buffer
};

// f[0..n), bytes[0..n): the frames (lender.lendable(), ours) and their
// data. nr members. rewrite(r, bytes, f, n, same) writes member r's fields
// into every frame, `same` when the frames are those of the previous call
// (a held frame's copy, same bytes, takes its place); send(r, f, n) hands
// them to member r's port and returns how many it took (a prefix); held(r,
// k): member r's port kept k frames; buffer(): an mbuf of the lender's home
// pool for a held frame's copy, or nullptr (the frame then leaves the
// arrays, and the next rewrite is told they changed). f and bytes are
// rewritten in place.
template <class Rewrite, class Send, class Held, class Buffer>
void replica_passes(const FrameLender& lender, rte_mbuf** f, uint8_t** bytes, unsigned n, unsigned nr,
                    Rewrite&& rewrite, Send&& send, Held&& held, Buffer&& buffer, ReplicaPassStats& st) {
  bool same = false;
  for (unsigned r = 0; r < nr && n != 0; ++r) {
    const bool last = r + 1 == nr;
    rewrite(r, bytes, f, n, same);
    same = true;
    if (!last)  // the port's free hands it back
      for (unsigned j = 0; j < n; ++j) lender.lend(f[j]);
    const unsigned sent = send(r, f, n);
    st.sent += sent;
    if (unlikely(sent < n)) {  // a full tx queue: this member's replicas of them are lost
      st.refused += n - sent;
      if (last) {
        rte_pktmbuf_free_bulk(f + sent, n - sent);
        break;
      }
      for (unsigned j = sent; j < n; ++j) lender.take_back(f[j]);
    }
    if (last) break;
    st.reused += n;
    lender.collect();
    unsigned kept = 0;
    for (unsigned j = 0; j < sent; ++j) kept += !lender.back(f[j]);
    if (likely(kept == 0)) continue;
    held(r, kept);
    st.held += kept;
    unsigned w = 0;
    for (unsigned j = 0; j < n; ++j) {
      rte_mbuf* x = f[j];
      uint8_t* d = bytes[j];
      if (j < sent && !lender.back(x)) {
        // Read only: the port reads it too. Given up: the port's free
        // returns it to its pool whenever it comes.
        rte_mbuf* b = buffer();
        if (b != nullptr) {
          const uint16_t len = x->data_len;
          rte_pktmbuf_reset(b);
          b->data_len = len;
          b->pkt_len = len;
          b->port = x->port;
          std::memcpy(rte_pktmbuf_mtod(b, uint8_t*), d, len);
          ++st.copies;
        } else {
          st.lost += nr - 1 - r;
        }
        lender.give_up(x);
        if (b == nullptr) {
          same = false;
          continue;
        }
        x = b;
        d = rte_pktmbuf_mtod(b, uint8_t*);
      }
      f[w] = x;
      bytes[w++] = d;
    }
    n = w;
  }
}

}  // namespace agq::dataplane
