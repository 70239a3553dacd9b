/* agq pipeline (docs/PROTOCOL.md) for TNA/T2NA: headers and metadata.
 * Field names follow proto/agq.hpp and PROTOCOL.md §1. */
#ifndef _AGQ_HEADERS_P4_
#define _AGQ_HEADERS_P4_

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<8>  IPPROTO_UDP    = 17;
const bit<16> AGQ_UDP_PORT   = 50100;

const bit<4> AGQ_VERSION          = 1;
const bit<4> AGQ_TYPE_DATA        = 1;
const bit<4> AGQ_TYPE_RESULT      = 2;
const bit<4> AGQ_TYPE_PS_RESULT   = 3;
const bit<4> AGQ_TYPE_FALLBACK    = 4;   /* FALLBACK_DATA */

const bit<8> AGQ_FLAG_VERSION    = 0x01;
const bit<8> AGQ_FLAG_RETRANSMIT = 0x02;
const bit<8> AGQ_FLAG_OVERFLOW   = 0x04;
const bit<8> AGQ_FLAG_FALLBACK   = 0x08;

/* Register sizes: rows and slots shared by all jobs (AgqConfig defaults). */
#ifndef AGQ_ROWS
#define AGQ_ROWS 4096
#endif
#ifndef AGQ_SLOTS
#define AGQ_SLOTS 32768
#endif
#ifndef AGQ_MAX_JOBS
#define AGQ_MAX_JOBS 4096     /* AgqProgram::kMaxJobs */
#endif
#ifndef FLOOD_GROUP
#define FLOOD_GROUP 0xFFFF
#endif
#ifndef AGQ_RECIRC_PORT
#define AGQ_RECIRC_PORT 6          /* Tofino 2 pipe 0 recirculation port; check your SKU */
#endif

typedef bit<16> row_idx_t;
typedef bit<16> slot_idx_t;

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header vlan_h {
    bit<3>  pcp;
    bit<1>  cfi;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header arp_h {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

/* PROTOCOL.md §1: 20 fixed bytes + 32 lanes = 148 bytes. */
header agq_h {
    bit<4>  ver;
    bit<4>  type;
    bit<8>  flags;
    bit<16> job_id;
    bit<8>  worker_id;
    bit<8>  num_workers;
    bit<16> slot;
    bit<32> seq;
    bit<8>  req_width;
    bit<8>  width;
    bit<8>  pos;
    bit<8>  guard;
    bit<8>  exponent;
    bit<8>  n_lanes;
    bit<16> reserved;
    bit<32> lane00; bit<32> lane01; bit<32> lane02; bit<32> lane03;
    bit<32> lane04; bit<32> lane05; bit<32> lane06; bit<32> lane07;
    bit<32> lane08; bit<32> lane09; bit<32> lane10; bit<32> lane11;
    bit<32> lane12; bit<32> lane13; bit<32> lane14; bit<32> lane15;
    bit<32> lane16; bit<32> lane17; bit<32> lane18; bit<32> lane19;
    bit<32> lane20; bit<32> lane21; bit<32> lane22; bit<32> lane23;
    bit<32> lane24; bit<32> lane25; bit<32> lane26; bit<32> lane27;
    bit<32> lane28; bit<32> lane29; bit<32> lane30; bit<32> lane31;
}

/* The pass-to-pass state of the C++ pipeline, ResubmitMd
 * (switch/pipeline/agq/ingress.hpp), 64 bits. The same header travels two ways:
 *  - resubmit (pass 1 -> pass 2 of a first contribution): emitted by the
 *    ingress deparser's Resubmit extern from md.resub, read back by the
 *    parser when ig_intr_md.resubmit_flag == 1;
 *  - recirculation (Tofino only, PROTOCOL.md §4 step 5): prepended to the
 *    original packet as hdr.recirc, sent to AGQ_RECIRC_PORT with
 *    bypass_egress, parsed again by the ingress parser on that port:
 *      realloc = 1  pass 2's compare-and-set failed: back to pass 1 "already
 *                   counted, already cleared" (C++: resub.realloc, counted in
 *                   agq_cas_retries);
 *      reread  = 1  a contribution that is not first read a PENDING window:
 *                   back to the slot_window step "already counted" with its
 *                   seen/complete (the C++ passes are atomic, so software never
 *                   takes this path; PROTOCOL.md §4 step 5).
 * in_port: the packet's own ingress port (a recirculated packet arrives on
 * the recirculation port; admission and result_resend need the worker's). */
header agq_resubmit_h {
    bit<8>  occ_old;       /* row_occupancy half v as pass 1 read it (the CAS's expected value) */
    bit<8>  occ_new;       /* with the old window released and the new one taken */
    bit<16> window;        /* new slot_window half (pos, w, FALLBACK, OVERFLOW) */
    bit<1>  complete;      /* count_v == N when the packet was counted */
    bit<1>  realloc;       /* recirculated after a failed CAS: no count, no lane clear */
    bit<1>  reread;        /* recirculated after reading a PENDING window: no count */
    bit<1>  seen;          /* (reread) the worker's bit was already set */
    @padding bit<3> _pad0;
    PortId_t in_port;      /* the original ingress port */
    @padding bit<16> _pad1;
}

/* Ingress -> egress, in front of Ethernet on every packet that goes through
 * the traffic manager to the egress (not on a recirculation: bypass_egress). */
header agq_bridge_h {
    bit<1>  rewrite;       /* multicast replica: egress_worker_t(job_id, egress_rid) */
    bit<1>  extract;       /* RESULT lanes: extract_t(win_end), then & result_mask */
    @padding bit<2> _pad;
    bit<4>  win_end;       /* pos + w of the result window (extract_t key) */
    bit<32> result_mask;   /* low W bits (grant_t) */
}

const ResubmitType_t AGQ_RESUBMIT_TYPE = 1;
const bit<16> AGQ_NO_PRUNE_RID = 0xFFFF;   /* ig_tm_md.rid of a job's multicast: no PRE node has it */
const DigestType_t SMAC_DIGEST_TYPE = 1;

struct smac_learn_digest_t {
    bit<48>  src_mac;
    PortId_t port;
}

/* Verdicts (C++ Verdict, the agq_forward_t key) are generated:
 * generated/verdict.p4 (V_DROP .. V_PS_RESULT_UNICAST). */
#include "generated/verdict.p4"

/* slot_window half (16 bits), switch/pipeline/agq/tables.hpp pack_window():
 *   [2:0] pos, [6:3] width in units, [7] FALLBACK, [8] OVERFLOW, [9] PENDING
 * (PENDING: set by a first contribution's pass 1, cleared by its pass 2). */
const bit<16> WIN_FALLBACK = 0x0080;
const bit<16> WIN_OVERFLOW = 0x0100;
const bit<16> WIN_PENDING  = 0x0200;

struct agq_pair32_t { bit<32> lo; bit<32> hi; }   /* lo = version 0, hi = version 1 */
struct agq_pair16_t { bit<16> lo; bit<16> hi; }
struct agq_pair8_t  { bit<8>  lo; bit<8>  hi; }

struct ingress_headers_t {
    agq_bridge_h   bridge;    /* emitted first when valid (not on a recirculation) */
    agq_resubmit_h recirc;    /* a recirculated retry (parsed on AGQ_RECIRC_PORT; emitted to recirculate) */
    ethernet_h     ethernet;
    vlan_h         vlan;
    ipv4_h         ipv4;
    arp_h          arp;
    udp_h          udp;
    agq_h          agq;
}

struct ingress_metadata_t {
    agq_resubmit_h resub;      /* pass 2: the resubmit header; pass 1: the one it arms */
    /* job_t (set_job) */
    bit<1>     job_hit;
    bit<8>     job_n;          /* N */
    bit<16>    job_slots;
    slot_idx_t slot_base;
    row_idx_t  row_base;
    bit<5>     row_shift;      /* log2(slots_per_row), 0..16 */
    bit<8>     guard;          /* g */
    bit<4>     max_units;      /* max_width / 4 */
    MulticastGroupId_t mcast_grp;   /* PRE group of the job's workers */
    bit<1>     deliver_ps;     /* result delivery = ps (agq_forward_t key) */
    PortId_t   ps_port;
    bit<32>    ps_ipv4;
    bit<48>    ps_mac;
    /* worker_t (set_worker) */
    bit<1>     worker_hit;
    PortId_t   w_port;
    bit<32>    w_ipv4;
    bit<32>    w_bit;          /* 1 << worker_id, as action data (no variable shift) */
    bit<48>    w_mac;
    /* pass */
    PortId_t   in_port;        /* ingress port of the packet (of its first pass when recirculated) */
    bit<1>     realloc;        /* C++ resub.realloc on pass 1 */
    bit<1>     reread;         /* back from a PENDING window */
    bit<1>     counted;        /* realloc || reread: slot_bitmap / slot_count skipped */
    /* indices */
    slot_idx_t slot_idx;
    row_idx_t  row_off;
    row_idx_t  row_idx;
    bit<1>     v;              /* slot version (flags bit 0) */
    bit<4>     req_units;      /* min(R / 4, max_units) */
    bit<3>     req_units_m1;   /* alloc_t key: req_units - 1 */
    bit<4>     r_units;        /* R / 4 (trunc_t key) */
    bit<3>     guard3;         /* grant_t key: g (0..5) */
    /* slot state */
    bit<32>    bitmap_old;
    bit<32>    seen_bits;      /* bitmap_old & w_bit */
    bit<1>     seen;
    bit<8>     count;
    bit<1>     first;
    bit<1>     complete;
    bit<16>    win_operand;    /* slot_window_merge operand: PENDING (pass 1) or OVERFLOW (new, clipped) */
    bit<16>    win;            /* slot_window half v as the register returned it */
    bit<3>     pos;
    bit<4>     w;
    bit<4>     win_end;        /* pos + w (align_t key; bridged for extract_t) */
    bit<1>     grant_ok;       /* grant_t */
    bit<32>    grant_result_mask;
    bit<32>    grant_value_mask;
    bit<1>     alloc_ok;       /* grant_alloc_t: the new window leaves W - g >= 2 */
    bit<32>    alloc_value_mask;
    bit<32>    alloc_result_mask;
    bit<3>     old_pos;        /* released window (previous use of v) */
    bit<4>     old_w;
    bit<8>     old_occ_mask;
    bit<32>    clear_mask;     /* ~cells of the released window (window_t) */
    bit<1>     old_hit;        /* window_t hit: there is a window to clear */
    bit<8>     occ;            /* row_occupancy half v (pass 1) */
    bit<8>     avail;          /* occ & ~old_occ_mask */
    bit<3>     new_pos;        /* alloc_t */
    bit<4>     new_w;
    bit<8>     new_occ_mask;
    bit<8>     cas_old;        /* row_occupancy_cas output: the half before the CAS */
    bit<1>     cas_ok;         /* cas_old == resub.occ_old */
    /* lanes */
    bit<1>     lane_run;       /* the lane registers run on this pass */
    bit<1>     lane_clear;     /* ... with lane_clear (pass 1), else lane_add */
    bit<1>     lane_load;      /* 0: the packet's value (add); 1: 0 (read the kept result) */
    /* decision */
    bit<1>     data_ok;        /* a DATA packet passed admission */
    bit<3>     verdict;        /* C++ Verdict (generated/verdict.p4) */
    bit<1>     resubmit;       /* pass 1 arms the resubmit */
    bit<1>     recirculate;    /* Tofino-only retry */
    PortId_t   learn_port;     /* smac learning digest */
}

struct egress_headers_t {
    agq_bridge_h   bridge;
    ethernet_h     ethernet;
    vlan_h         vlan;
    ipv4_h         ipv4;
    udp_h          udp;
    agq_h          agq;
}

struct egress_metadata_t {
}

#endif
