// AgqProgram's control plane: carving rows and slots (first fit), errors as
// messages, removal clears the job's registers, tables and PRE group.
#include "agq_test_util.hpp"

using namespace agq;
using namespace agq::agq_test;

namespace {
using AgqJobs = AgqFixture;
}

TEST_F(AgqJobs, CarvesContiguousSpaceFirstFit) {
  add(job_spec(1, 2, 8, 4));  // 2 slots per row
  add(job_spec(2, 2, 4, 4));
  const auto p1 = *prog.placement(1), p2 = *prog.placement(2);
  EXPECT_EQ(p1.row_base, 0u);
  EXPECT_EQ(p1.rows, 4u);
  EXPECT_EQ(p1.row_shift, 1);
  EXPECT_EQ(p2.row_base, 4u);
  EXPECT_EQ(p2.slot_base, 8u);
  EXPECT_EQ(p2.row_shift, 0);
  EXPECT_NE(p1.mcast_grp, p2.mcast_grp);
  EXPECT_EQ(p1.mcast_grp, AgqProgram::kJobGroupBase + p1.job_index);
  ASSERT_EQ(pre.members(p1.mcast_grp).size(), 2u);
  EXPECT_EQ(pre.members(p1.mcast_grp)[1], (tna::Replica{worker_spec(1, 1).port, 1}));
  ASSERT_TRUE(remove(1));
  add(job_spec(3, 4, 3, 2));  // fits the hole job 1 left
  EXPECT_EQ(prog.placement(3)->row_base, 0u);
  EXPECT_EQ(prog.placement(3)->slot_base, 0u);
  EXPECT_EQ(prog.placement(3)->guard, 2);
  ASSERT_EQ(prog.jobs().size(), 2u);
  EXPECT_EQ(prog.jobs()[0].job_id, 2);
}

TEST_F(AgqJobs, ErrorsAreMessages) {
  add(job_spec(1, 2, 4, 4));
  auto err = [&](JobSpec j) { return prog.add_job(j).value_or("<accepted>"); };
  EXPECT_NE(err(job_spec(1, 2, 4, 4)).find("already"), std::string::npos);
  EXPECT_NE(err(job_spec(0, 2, 4, 4)).find("reserved"), std::string::npos);
  EXPECT_NE(err(job_spec(5, 0, 4, 4)).find("num_workers"), std::string::npos);
  EXPECT_NE(err(job_spec(5, 33, 4, 4)).find("num_workers"), std::string::npos);
  { JobSpec j = job_spec(5, 2, 4, 4); j.workers.pop_back(); EXPECT_NE(err(j).find("exactly"), std::string::npos); }
  { JobSpec j = job_spec(5, 2, 4, 4); j.workers[1].worker_id = 0; EXPECT_NE(err(j).find("twice"), std::string::npos); }
  { JobSpec j = job_spec(5, 2, 4, 4); j.max_width = 6; EXPECT_NE(err(j).find("max_width"), std::string::npos); }
  EXPECT_NE(err(job_spec(5, 2, 0, 4)).find("slots"), std::string::npos);
  EXPECT_NE(err(job_spec(5, 2, 4, 0)).find("rows"), std::string::npos);
  EXPECT_NE(err(job_spec(5, 2, 64, 64)).find("no space"), std::string::npos);   // 60 rows left
  EXPECT_NE(err(job_spec(5, 2, 300, 60)).find("no space"), std::string::npos);  // 252 slots left
  EXPECT_EQ(prog.jobs().size(), 1u);
  EXPECT_FALSE(remove(42));
}

TEST_F(AgqJobs, RemoveClearsStateTablesAndGroup) {
  const JobSpec j = job_spec(7, 2, 2, 1);
  add(j);
  const auto p = *prog.placement(7);
  send(j, data_pkt(j, 0, 0, 0, 16, std::vector<uint32_t>(32, 0x1234)));
  send(j, data_pkt(j, 0, 1, 1, 8, std::vector<uint32_t>(32, 0x12)));
  EXPECT_NE(cell(p.row_base, "row_occupancy.v0"), 0u);
  ASSERT_TRUE(remove(7));
  EXPECT_FALSE(pre.has_group(p.mcast_grp));
  for (auto& [name, v] : prog.dump_aggregator(p.row_base)) EXPECT_EQ(v, 0u) << name;
  // Its packets are now from an unknown job; a new job there starts clean.
  EXPECT_TRUE(is_drop(send(j, data_pkt(j, 1, 0, 0, 16, {})).decision, AgqDrop::UnknownJob));
  add(j);
  for (auto& [name, v] : prog.dump_aggregator(prog.placement(7)->row_base)) EXPECT_EQ(v, 0u) << name;
}
