// Every register action of the classic pipeline, one cell at a time, and the
// TNA rule check (one access per register per pass).
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>

#include "classic_test_util.hpp"
#include "pipeline/classic/ingress.hpp"
#include "pipeline/classic/registers.hpp"
#include "pipeline/reference/classic_reference.hpp"
#include "tna/pass.hpp"

using namespace agq;
using namespace agq::pipeline::classic;

namespace {

// Runs `fn` inside one pass, as the program does around each ingress pass.
template <typename Fn>
void in_pass(Fn&& fn) {
  tna::PassClock::begin_pass();
  fn();
  tna::PassClock::end_pass();
}

}  // namespace

TEST(ClassicRegisterActions, JobAndSeqDetect) {
  tna::Register<uint16_t> r("job_and_seq_reg", 4);
  EXPECT_EQ(job_and_seq_detect(r, 7).execute(1), 1);  // free: taken
  EXPECT_EQ(r.read(1), 7);
  EXPECT_EQ(job_and_seq_detect(r, 7).execute(1), 2);  // owner: aggregate
  EXPECT_EQ(job_and_seq_detect(r, 8).execute(1), 0);  // other owner: collision
  EXPECT_EQ(r.read(1), 7);
}

TEST(ClassicRegisterActions, JobAndSeqClear) {
  tna::Register<uint16_t> r("job_and_seq_reg", 4);
  r.write(2, 9);
  EXPECT_EQ(job_and_seq_clear(r, 8).execute(2), 0);
  EXPECT_EQ(r.read(2), 9);
  EXPECT_EQ(job_and_seq_clear(r, 9).execute(2), 1);
  EXPECT_EQ(r.read(2), 0);
  EXPECT_EQ(job_and_seq_clear(r, 9).execute(2), 0);  // second ACK: not the owner any more
}

TEST(ClassicRegisterActions, InsertPosiCyclesByThree) {
  tna::Register<uint8_t> r("insert_posi", 1);
  const uint8_t expected[] = {0, 3, 6, 1, 4, 7, 2, 5, 0, 3};
  for (uint8_t e : expected) EXPECT_EQ(insert_posi_advance(r).execute(0), e);
}

TEST(ClassicRegisterActions, StartPosiWriteReadReadClear) {
  tna::Register<uint8_t> r("start_posi", 2);
  EXPECT_EQ(start_posi_write(r, 5).execute(1), 5);
  EXPECT_EQ(start_posi_read(r).execute(1), 5);
  EXPECT_EQ(r.read(1), 5);
  EXPECT_EQ(start_posi_read_clear(r).execute(1), 5);
  EXPECT_EQ(r.read(1), 0);
}

TEST(ClassicRegisterActions, WorkerAggCountWrapsAt256AndClears) {
  tna::Register<uint8_t> r("worker_agg", 1);
  for (int i = 1; i <= 255; ++i) ASSERT_EQ(worker_agg_count(r).execute(0), i);
  EXPECT_EQ(worker_agg_count(r).execute(0), 0);  // 8-bit wrap
  EXPECT_EQ(worker_agg_count(r).execute(0), 1);
  worker_agg_clear(r).execute(0);
  EXPECT_EQ(r.read(0), 0);
}

TEST(ClassicRegisterActions, DataIsEmptySetRemoveRead) {
  tna::Register<uint8_t> r("data_isEmpty", 1);
  EXPECT_EQ(data_isEmpty_set(r, 0x80).execute(0), 0x00);  // returns B_old
  EXPECT_EQ(data_isEmpty_set(r, 0x10).execute(0), 0x80);
  EXPECT_EQ(data_isEmpty_set(r, 0x10).execute(0), 0x90);  // OR: idempotent
  EXPECT_EQ(data_isEmpty_read(r).execute(0), 0x90);
  EXPECT_EQ(data_isEmpty_remove(r, 0x80).execute(0), 0x90);
  EXPECT_EQ(r.read(0), 0x10);
  // Arithmetic subtraction: removing an absent bit borrows (quirk §5.1).
  EXPECT_EQ(data_isEmpty_remove(r, 0x80).execute(0), 0x10);
  EXPECT_EQ(r.read(0), 0x90);
}

TEST(ClassicRegisterActions, RegClearAndAggWrap) {
  tna::Register<uint32_t> r("reg0", 1);
  EXPECT_EQ(reg_agg(r, 0x0000F0C0).execute(0), 0x0000F0C0u);
  EXPECT_EQ(reg_agg(r, 0x0000F0C0).execute(0), 0x0001E180u);
  r.write(0, 0x12345678);
  EXPECT_EQ(reg_clear(r, 0xFFF00000u).execute(0), 0x12300000u);
  r.write(0, 0xFFFFFFFF);
  EXPECT_EQ(reg_agg(r, 2).execute(0), 1u);  // plain 32-bit wrap, no saturation
}

// The rule check itself: a tiny "program" that touches one register twice
// in a pass must be refused; different cells or different passes are fine.
TEST(TnaRules, DoubleAccessInOnePassIsRefused) {
#ifndef AGQ_CHECK_TNA_RULES
  GTEST_SKIP() << "built without AGQ_CHECK_TNA_RULES";
#else
  tna::Register<uint32_t> r("r", 4);
  tna::PassClock::begin_pass();
  reg_agg(r, 1).execute(0);
  // One stateful ALU per register: another cell of the same register is a
  // second access too.
  EXPECT_THROW(reg_agg(r, 1).execute(1), std::logic_error);
  EXPECT_THROW(reg_clear(r, 0).execute(0), std::logic_error);  // same cell, same pass
  tna::PassClock::end_pass();
  in_pass([&] { EXPECT_NO_THROW(reg_agg(r, 1).execute(0)); });  // next pass
  // Outside any pass (control-plane-like use in these tests) nothing is checked.
  reg_agg(r, 1).execute(0);
  reg_agg(r, 1).execute(0);
  EXPECT_EQ(r.read(0), 4u);
#endif
}

// The classic ingress touches each register at most once per pass: running
// it twice inside one pass must trip the check (so the check really sees its
// accesses), and ClassicProgram must open one pass per ingress run: two for
// a first packet (resubmit), one otherwise. Counted through PassClock ids.
TEST(TnaRules, ClassicIngressTwiceInOnePassTrips) {
#ifndef AGQ_CHECK_TNA_RULES
  GTEST_SKIP() << "built without AGQ_CHECK_TNA_RULES";
#else
  Ingress ingress(ClassicConfig{1, {2}, 64});
  pipeline::Headers hdr;
  hdr.agq_classic = classic_test::agq_pkt(1, 10, 2, {1, 2, 3, 4});
  hdr.agq_classic_valid = true;
  auto run = [&] {
    Metadata md;
    tna::IngressIntrinsicMd ig;
    tna::IngressIntrinsicMdForTm tm;
    tna::IngressIntrinsicMdForDeparser dp;
    ingress.apply(hdr, md, ig, tm, dp);
  };
  in_pass(run);
  in_pass(run);
  tna::PassClock::begin_pass();
  run();
  EXPECT_THROW(run(), std::logic_error);
  tna::PassClock::end_pass();
#endif
}

namespace {
uint64_t passes_during(const std::function<void()>& fn) {
  tna::PassClock::begin_pass();
  const uint64_t before = tna::PassClock::current();
  tna::PassClock::end_pass();
  fn();
  tna::PassClock::begin_pass();
  const uint64_t after = tna::PassClock::current();
  tna::PassClock::end_pass();
  return after - before - 1;
}
}  // namespace

// The TNA-vocabulary program (the fast ClassicProgram's reference model) is
// the one whose passes run under the rule check.
TEST(TnaRules, ClassicReferenceRunsEachIngressPassInItsOwnPass) {
  tna::ReplicationEngine pre;
  pipeline::reference::ClassicReference prog(ClassicConfig{1, {2, 3}, 35000}, pipeline::ForwardingConfig{}, pre);
  auto frame = proto::build_agq_classic_frame(classic_test::frame_spec(),
                                              classic_test::agq_pkt(1, 300, 2, {1, 2, 3, 4}));
  auto send = [&] {
    auto f = frame;
    EXPECT_NO_THROW(prog.process(f, tna::IngressIntrinsicMd{}));
  };
  EXPECT_EQ(passes_during(send), 2u);  // first packet: resubmitted
  EXPECT_EQ(passes_during(send), 1u);
  EXPECT_EQ(tna::PassClock::current(), 0u);  // closed afterwards
}
