// The fleet view's per-publisher budgets and queues, with driven time: token buckets, the queue
// bounds, the round robin, and the bounded set of budget entries.
#include "fleet/fleet_intake.hpp"

#include <string>

#include <gtest/gtest.h>

namespace gpustream::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = PublisherIntake::Clock;
const Clock::time_point t0 = Clock::time_point{} + 1h;

IntakeItem item(const std::string& node, std::size_t bytes = 10) {
  IntakeItem i;
  i.node = node;
  i.data.assign(bytes, 'x');
  return i;
}

TEST(TokenBucket, RefusesWhatItLacksRefillsWithTimeAndPaysDebtsBack) {
  TokenBucket b(10, 20, t0);  // 10 a second, 20 at most
  EXPECT_TRUE(b.take(20, t0));
  EXPECT_FALSE(b.take(1, t0));
  EXPECT_TRUE(b.take(5, t0 + 500ms));
  EXPECT_FALSE(b.take(1, t0 + 500ms));
  EXPECT_TRUE(b.full(t0 + 10s));  // capped: never more than 20
  EXPECT_FALSE(b.take(21, t0 + 10s));
  b.charge(50);  // a debt: −30
  EXPECT_FALSE(b.positive(t0 + 10s));
  EXPECT_FALSE(b.positive(t0 + 13s));  // 0: still nothing left
  EXPECT_TRUE(b.positive(t0 + 13100ms));
}

TEST(PublisherIntake, ServesPublishersInTurnOneMessageEach) {
  PublisherBudget budget;
  budget.messages_per_second = 1e6;
  PublisherIntake in(budget, 100);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queued);
  ASSERT_EQ(in.push(item("b"), t0), PublisherIntake::Push::queued);
  ASSERT_EQ(in.push(item("c"), t0), PublisherIntake::Push::queued);
  std::string order;
  while (auto i = in.try_pop()) {
    order += i->node;
    in.finish(i->node);
  }
  EXPECT_EQ(order, "abcaa");
  EXPECT_EQ(in.pending(), 0U);
  // A publisher whose message is being decoded is not served again before finish().
  ASSERT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queued);
  ASSERT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queued);
  const auto first = in.try_pop();
  ASSERT_TRUE(first);
  EXPECT_FALSE(in.try_pop());
  in.finish("a");
  EXPECT_TRUE(in.try_pop());
}

TEST(PublisherIntake, BoundsEachQueueInMessagesAndBytesAndAllOfThemTogether) {
  PublisherBudget budget;
  budget.messages_per_second = 1e6;
  budget.queue_messages = 4;
  budget.queue_bytes = 1000;
  budget.total_queue_bytes = 1500;
  PublisherIntake in(budget, 100);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queued);
  EXPECT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queue_full);  // 5th message
  EXPECT_EQ(in.push(item("b", 900), t0), PublisherIntake::Push::queued);
  EXPECT_EQ(in.push(item("b", 100), t0), PublisherIntake::Push::queue_full);  // b's bytes
  EXPECT_EQ(in.push(item("c", 500), t0), PublisherIntake::Push::queue_full);  // all together
  EXPECT_EQ(in.pending(), 5U);
  EXPECT_LE(in.pending_bytes(), 1500U);
}

TEST(PublisherIntake, RefusesPastTheMessageRateAndKeepsAtMostMaxPublishers) {
  PublisherBudget budget;
  budget.messages_per_second = 2;
  budget.burst = 1s;
  PublisherIntake in(budget, 2);
  EXPECT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queued);
  EXPECT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queued);
  EXPECT_EQ(in.push(item("a"), t0), PublisherIntake::Push::budget_messages);
  EXPECT_EQ(in.push(item("a"), t0 + 500ms), PublisherIntake::Push::queued);
  EXPECT_EQ(in.push(item("b"), t0), PublisherIntake::Push::queued);
  // Two publishers, both with queued messages: a third has no entry to take.
  EXPECT_EQ(in.push(item("c"), t0), PublisherIntake::Push::queue_full);
  EXPECT_EQ(in.publishers(), 2U);
  while (auto i = in.try_pop()) in.finish(i->node);
  // Now both are idle: c replaces the one idle longest (b: a's last message was decoded last).
  EXPECT_EQ(in.push(item("c"), t0), PublisherIntake::Push::queued);
  EXPECT_EQ(in.publishers(), 2U);
}

TEST(PublisherIntake, CloseWakesTheWaiters) {
  PublisherIntake in(PublisherBudget{}, 10);
  in.close();
  EXPECT_FALSE(in.wait_for_room());
  EXPECT_EQ(in.push(item("a"), t0), PublisherIntake::Push::queue_full);
}

}  // namespace
}  // namespace gpustream::transport::test
