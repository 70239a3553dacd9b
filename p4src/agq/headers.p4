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

/* Register and table sizes: p4src/agq/agq_limits.h (shared with the
 * switch's config loader and setup_agq.py). */
#include "agq_limits.h"

/* Lanes per pass: 32 on Tofino 2 (lane00..lane31), 16 on Tofino 1
 * (lane00..lane15, the 16-lane profile of PROTOCOL.md §10). A Tofino 2 build
 * also serves 16-lane jobs: their packets carry no agq_hi header. */
#ifndef AGQ_LANES
#if __TARGET_TOFINO__ == 1
#define AGQ_LANES 16
#else
#define AGQ_LANES 32
#endif
#endif
#if AGQ_LANES != 16 && AGQ_LANES != 32
#error "AGQ_LANES must be 16 or 32 (PROTOCOL.md §10)"
#endif
#ifndef FLOOD_GROUP
#define FLOOD_GROUP 0xFFFF
#endif
#ifndef AGQ_RECIRC_PORT
#if __TARGET_TOFINO__ == 1
#define AGQ_RECIRC_PORT 68         /* Tofino 1 pipe 0 recirculation port */
#else
#define AGQ_RECIRC_PORT 6          /* Tofino 2 pipe 0 recirculation port; check your SKU */
#endif
#endif
/* Ordinary forwarding tables (forwarding.p4): sized to share the stages'
 * SRAM with the agq registers (the software switch's defaults are 65536). */
#ifndef FWD_TABLE_SIZE
#define FWD_TABLE_SIZE 16384
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

/* PROTOCOL.md §1: 20 fixed bytes + n_lanes lanes. agq_h holds the fixed
 * part and lane00..lane15 (a 16-lane packet: 84 bytes); agq_hi_h the lanes
 * lane16..lane31 of a 32-lane packet (parsed when n_lanes == 32). */
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
    bit<16> epoch;         /* the switch's boot epoch in every frame it makes (§11) */
    bit<32> lane00; bit<32> lane01; bit<32> lane02; bit<32> lane03;
    bit<32> lane04; bit<32> lane05; bit<32> lane06; bit<32> lane07;
    bit<32> lane08; bit<32> lane09; bit<32> lane10; bit<32> lane11;
    bit<32> lane12; bit<32> lane13; bit<32> lane14; bit<32> lane15;
}

header agq_hi_h {
    bit<32> lane16; bit<32> lane17; bit<32> lane18; bit<32> lane19;
    bit<32> lane20; bit<32> lane21; bit<32> lane22; bit<32> lane23;
    bit<32> lane24; bit<32> lane25; bit<32> lane26; bit<32> lane27;
    bit<32> lane28; bit<32> lane29; bit<32> lane30; bit<32> lane31;
}

/* Every lane of a pass: M(header, NN). The generated shift tables and the
 * lane controls use it, so one program text serves both lane counts. */
#define AGQ_LANES_LO(M) \
    M(agq, 00) M(agq, 01) M(agq, 02) M(agq, 03) M(agq, 04) M(agq, 05) M(agq, 06) M(agq, 07) \
    M(agq, 08) M(agq, 09) M(agq, 10) M(agq, 11) M(agq, 12) M(agq, 13) M(agq, 14) M(agq, 15)
#if AGQ_LANES == 32
#define AGQ_LANES_HI(M) \
    M(agq_hi, 16) M(agq_hi, 17) M(agq_hi, 18) M(agq_hi, 19) M(agq_hi, 20) M(agq_hi, 21) M(agq_hi, 22) M(agq_hi, 23) \
    M(agq_hi, 24) M(agq_hi, 25) M(agq_hi, 26) M(agq_hi, 27) M(agq_hi, 28) M(agq_hi, 29) M(agq_hi, 30) M(agq_hi, 31)
#else
#define AGQ_LANES_HI(M)
#endif
#define AGQ_LANES_FOR_EACH(M) AGQ_LANES_LO(M) AGQ_LANES_HI(M)
/* Lane actions of the generated tables: every lane of hdr shifted/masked/set. */
#define AGQ_LANE_SHR_(H, L) hdr.H.lane##L = hdr.H.lane##L >> AGQ_SHIFT_;
#define AGQ_LANE_SHL_(H, L) hdr.H.lane##L = hdr.H.lane##L << AGQ_SHIFT_;
#define AGQ_LANE_AND_(H, L) hdr.H.lane##L = hdr.H.lane##L & AGQ_OPERAND_;
#define AGQ_LANE_SET_(H, L) hdr.H.lane##L = AGQ_OPERAND_;

/* The pass-to-pass state of the C++ pipeline, ResubmitMd
 * (switch/pipeline/agq/ingress.hpp), 64 bits: emitted by the ingress
 * deparser's Resubmit extern from md.resub (pass 1 of a first contribution),
 * read back by the parser when ig_intr_md.resubmit_flag == 1 (pass 2). A
 * resubmitted packet keeps its ingress port. Every field a whole byte or
 * word: an action writes each container from one source (bf-p4c refuses a
 * container written from action data, another PHV field and itself). */
header agq_resubmit_h {
    bit<8>  occ_old;       /* row_occupancy half v as pass 1 read it (the CAS's expected value) */
    bit<8>  occ_new;       /* with the old window released and the new one taken */
    bit<16> window;        /* new slot_window half (pos, w, FALLBACK, OVERFLOW); before
                            * stage 10 of pass 1 (and on any other packet) also
                            * slot_window_merge's operand: OVERFLOW of a new clipped
                            * contribution, or 0 (window_alloc.p4, SlotWindow) */
    bit<8>  complete;      /* 1: count_v == N when the packet was counted */
    bit<8>  realloc;       /* C++ resub.realloc: always 0 on a resubmit (pass 1 -> pass 2) */
    bit<16> reserved;      /* 0 */
}

/* A Tofino-only retry (PROTOCOL.md §4 step 5), prepended to the original
 * packet, sent to AGQ_RECIRC_PORT with bypass_egress and parsed again by the
 * ingress parser on that port:
 *   realloc = 1  pass 2's compare-and-set failed: back to pass 1 "already
 *                counted, already cleared" (C++: resub.realloc, counted in
 *                agq_cas_retries);
 *   reread  = 1  a contribution that is not first read a PENDING window:
 *                back to the slot_window step "already counted" with its
 *                seen/complete (the C++ passes are atomic, so software never
 *                takes this path; PROTOCOL.md §4 step 5).
 * in_port: the packet's own ingress port (a recirculated packet arrives on
 * the recirculation port; admission and result_resend need the worker's). */
header agq_recirc_h {
    bit<8>  complete;
    bit<8>  realloc;
    bit<8>  reread;
    bit<8>  seen;
    bit<16> in_port;       /* PortId_t, zero-extended */
}

/* Ingress -> egress, in front of Ethernet on every packet that goes through
 * the traffic manager to the egress (not on a recirculation: bypass_egress).
 * Two bytes: the Tofino 1 egress parser's longest path (bridge + Ethernet +
 * VLAN + IPv4 + UDP + a 16-lane agq header) must stay within 160 bytes. The
 * flags and the window are separate bytes (one write source each). */
header agq_bridge_h {
    @padding bit<6> _pad;
    bit<1>  extract;       /* RESULT lanes: extract_t(win), then & its result mask */
    bit<1>  rewrite;       /* multicast replica: egress_worker_t(job_id, egress_rid) */
    bit<8>  win;           /* the result window: slot_window bits 6..0 (pos, w) */
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
    agq_recirc_h   recirc;    /* a recirculated retry (parsed on AGQ_RECIRC_PORT; emitted to recirculate) */
    ethernet_h     ethernet;
    vlan_h         vlan;
    ipv4_h         ipv4;
    arp_h          arp;
    udp_h          udp;
    agq_h          agq;
    agq_hi_h       agq_hi;
}

/* Admission (JobCheck, admit_t): the C++ AgqDrop reasons of validate(), in
 * its order, or what passed. */
const bit<3> ADM_NONE       = 0;
const bit<3> ADM_MALFORMED  = 1;
const bit<3> ADM_UNKNOWN    = 2;
const bit<3> ADM_BAD_WORKER = 3;
const bit<3> ADM_BAD_WIDTH  = 4;
const bit<3> ADM_DATA       = 5;    /* a DATA from the job's worker (slot range: stage 2) */
const bit<3> ADM_PS         = 6;    /* a PS_RESULT from the job's PS (verdict: md.ps_verdict) */
/* Header classes (hdr_t): version, type, n_lanes, and R of a DATA. */
const bit<2> HDR_MALFORMED      = 0;
const bit<2> HDR_PS             = 1;
const bit<2> HDR_DATA           = 2;
const bit<2> HDR_DATA_BAD_WIDTH = 3;

/* Field widths follow the PHV: 8/16/32-bit containers, one value per field,
 * no arithmetic across slices of one field (every slice a table keys on is a
 * field of its own or a constant slice). */
struct ingress_metadata_t {
    agq_resubmit_h resub;      /* pass 2: the resubmit header; pass 1: the one it arms */
    /* job_t (set_job), stage 0 */
    bit<1>     job_hit;
    bit<8>     job_n;          /* N */
    bit<8>     job_lanes;      /* the job's lane profile: n_lanes of its packets */
    bit<16>    job_slots;
    slot_idx_t slot_base;
    row_idx_t  row_base;
    bit<8>     row_shift;      /* log2(slots_per_row), 0..16 */
    bit<8>     guard;          /* g (grant_t / trunc_t key) */
    bit<8>     max_units;      /* max_width / 4 */
    MulticastGroupId_t mcast_grp;   /* PRE group of the job's workers */
    bit<1>     deliver_ps;     /* result delivery = ps (agq_forward_t key) */
    PortId_t   ps_port;
    bit<32>    ps_ipv4;
    bit<48>    ps_mac;
    bit<16>    epoch;          /* epoch_t: the switch's boot epoch (PROTOCOL.md §11) */
    /* worker_t (set_worker), stage 0 */
    bit<1>     worker_hit;
    PortId_t   w_port;
    bit<32>    w_ipv4;
    bit<32>    w_bit;          /* 1 << worker_id, as action data (no variable shift) */
    bit<48>    w_mac;
    /* pass */
    PortId_t   in_port;        /* ingress port of the packet (of its first pass when recirculated) */
    bit<1>     realloc;        /* C++ resub.realloc on pass 1 */
    bit<1>     reread;         /* back from a PENDING window */
    /* admission and indices, stages 0-2 */
    bit<8>     n_diff;         /* N ^ num_workers (job_t) */
    bit<8>     lanes_diff;     /* lanes ^ n_lanes (job_t) */
    bit<32>    ps_ip_diff;     /* ps_ipv4 ^ IPv4 source (job_t) */
    PortId_t   ps_port_diff;   /* ps_port ^ ingress port (job_t) */
    bit<32>    w_ip_diff;      /* worker ipv4 ^ IPv4 source (worker_t) */
    bit<8>     minw_short;     /* w_min |-| min_width (job_t): 0 iff min_width >= g + 2 */
    PortId_t   w_port_diff;    /* worker port ^ ingress port (worker_t) */
    bit<2>     hdr_class;      /* HDR_* (hdr_t, stage 0) */
    bit<3>     adm;            /* ADM_* (admit_t, stage 1) */
    bit<1>     slot_chk;       /* the slot range applies (DATA, PS_RESULT, bad width) */
    bit<1>     count_it;       /* an admitted DATA's pass that runs slot_bitmap / slot_count */
    bit<3>     ps_verdict;     /* V_PS_RESULT or V_PS_RESULT_UNICAST (admit_t) */
    bit<1>     go;             /* an admitted DATA within the job's slots: the slot stages run */
    bit<16>    slot_room;      /* slots |-| slot: 0 = slot out of range (drops_agq_bad_slot) */
    slot_idx_t slot_idx;
    row_idx_t  row_off;
    row_idx_t  row_idx;
    bit<1>     v;              /* slot version (flags bit 0) */
    bit<1>     ovf;            /* OVERFLOW (flags bit 2) */
    bit<8>     r_units;        /* R / 4 (trunc_t / align_t key) */
    bit<8>     req_units;      /* min(R / 4, max_units) (alloc_t key) */
    bit<8>     min_units;      /* min_width / 4: a DATA's width byte (grant_alloc_t key) */
    /* slot state */
    bit<32>    bitmap_old;
    bit<1>     seen;
    bit<16>    count_new;      /* slot_count_inc output (0 when seen); 16 bits, like slot_window's other SALU operand resub.window */
    bit<8>     count_old;      /* slot_count_read output (seen) */
    bit<1>     first;
    bit<1>     complete;
    bit<16>    win;            /* slot_window half v as the register returned it */
    bit<1>     alloc_ok;       /* grant_alloc_t: the new window is >= min_width */
    bit<8>     old_occ_mask;   /* row_occupancy bits of the released window (window_t) */
    bit<1>     old_hit;        /* window_t hit: there is a window to clear */
    bit<8>     occ;            /* row_occupancy half v (pass 1) */
    bit<8>     avail;          /* occ & ~old_occ_mask */
    bit<8>     new_occ_mask;   /* alloc_t */
    bit<8>     new_w;
    bit<16>    new_window;     /* pack_window(pos, w, 0, 0) of the grant (alloc_t) */
    bit<8>     cas_old;        /* row_occupancy_cas output: the half before the CAS */
    bit<1>     cas_ok;         /* cas_old == resub.occ_old */
    /* lanes */
    bit<1>     lane_run;       /* the lane registers run on this pass */
    bit<1>     lane_clear;     /* ... with lane_clear (pass 1), else lane_add */
    bit<1>     lane_load;      /* 1: add 0 (read the kept result) */
    /* decision */
    bit<3>     verdict;        /* C++ Verdict (generated/verdict.p4) */
    bit<1>     resubmit;       /* pass 1 arms the resubmit */
    bit<1>     recirculate;    /* Tofino-only retry */
    bit<1>     ipv4_csum;      /* the deparser recomputes the IPv4 checksum */
    PortId_t   learn_port;     /* smac learning digest */
}

struct egress_headers_t {
    agq_bridge_h   bridge;
    ethernet_h     ethernet;
    vlan_h         vlan;
    ipv4_h         ipv4;
    udp_h          udp;
    agq_h          agq;
    agq_hi_h       agq_hi;
}

struct egress_metadata_t {
    bit<1>  ipv4_csum;         /* a replica's destination was rewritten */
}

#endif
