// SharedOptional: an optional whose value is one shared heap block. Copies share the block;
// writing through a shared one copies it first; it reads, writes and compares as std::optional.
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gpustream/model.hpp"
#include "gpustream/shared_optional.hpp"

namespace gpustream {
namespace {

ProcessContainer a_container(std::string id = std::string(64, 'f')) {
  return ProcessContainer{"containerd", std::move(id), "", "burstable"};
}

TEST(SharedOptional, ADefaultOneIsUnset) {
  const SharedOptional<ProcessContainer> o;
  EXPECT_FALSE(o.has_value());
  EXPECT_FALSE(o);
  EXPECT_EQ(o, std::nullopt);
  EXPECT_EQ(o.use_count(), 0);
  EXPECT_THROW((void)o.value(), std::bad_optional_access);
  EXPECT_EQ(o.value_or(a_container("x")).id, "x");
}

TEST(SharedOptional, ACopySharesTheBlock) {
  SharedOptional<ProcessContainer> a = a_container();
  const SharedOptional<ProcessContainer> b = a;  // NOLINT(performance-unnecessary-copy-*)
  EXPECT_TRUE(b.shares_with(a));
  EXPECT_EQ(&*b, &*std::as_const(a));
  EXPECT_EQ(a.use_count(), 2);
  {
    const auto c = b;  // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_EQ(a.use_count(), 3);
  }
  EXPECT_EQ(a.use_count(), 2);
  SharedOptional<ProcessContainer> moved = std::move(a);
  EXPECT_TRUE(moved.shares_with(b));
  EXPECT_EQ(b.use_count(), 2) << "a move hands the reference over";
}

TEST(SharedOptional, ReadingAConstOneNeverCopies) {
  SharedOptional<ProcessContainer> a = a_container();
  const SharedOptional<ProcessContainer> b = a;  // NOLINT(performance-unnecessary-copy-*)
  EXPECT_EQ(b->runtime, "containerd");
  EXPECT_EQ((*b).qos, "burstable");
  EXPECT_EQ(b.value().id, std::string(64, 'f'));
  EXPECT_TRUE(b.shares_with(a));
}

TEST(SharedOptional, WritingASharedOneCopiesItFirst) {
  SharedOptional<ProcessContainer> a = a_container();
  const SharedOptional<ProcessContainer> b = a;  // NOLINT(performance-unnecessary-copy-*)
  a->qos = "guaranteed";                         // operator-> on a non-const one: copy on write
  EXPECT_FALSE(a.shares_with(b));
  EXPECT_EQ(a->qos, "guaranteed");
  EXPECT_EQ(b->qos, "burstable") << "the other owner keeps what it had";
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 1);

  SharedOptional<ProcessContainer> c = b;
  (*c).id = "abc";  // operator*
  EXPECT_EQ(b->id, std::string(64, 'f'));
  SharedOptional<ProcessContainer> d = b;
  d.value().runtime = "docker";  // value()
  EXPECT_EQ(b->runtime, "containerd");
  EXPECT_EQ(d->runtime, "docker");
}

TEST(SharedOptional, WritingTheOnlyOwnerWritesInPlace) {
  SharedOptional<ProcessContainer> a = a_container();
  const ProcessContainer* before = &*std::as_const(a);
  a->qos = "besteffort";
  EXPECT_EQ(&*std::as_const(a), before) << "no copy when nobody else holds the block";
  {
    const auto b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  }
  a->qos = "guaranteed";  // the other owner is gone: in place again
  EXPECT_EQ(&*std::as_const(a), before);
}

TEST(SharedOptional, AssignmentEmplaceAndResetLeaveOtherOwnersAlone) {
  SharedOptional<ProcessContainer> a = a_container();
  const SharedOptional<ProcessContainer> b = a;  // NOLINT(performance-unnecessary-copy-*)
  a = a_container("new");                        // from T
  EXPECT_EQ(a->id, "new");
  EXPECT_EQ(b->id, std::string(64, 'f'));
  a.emplace(ProcessContainer{"docker", "d", "", ""});
  EXPECT_EQ(a->runtime, "docker");
  EXPECT_EQ(b->runtime, "containerd");
  a = std::nullopt;
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  a = b;
  a.reset();
  EXPECT_FALSE(a);
  EXPECT_EQ(b.use_count(), 1);
  EXPECT_EQ(b->runtime, "containerd");
}

TEST(SharedOptional, EqualityIsByValue) {
  const SharedOptional<ProcessContainer> a = a_container();
  const SharedOptional<ProcessContainer> b = a_container();  // another block, equal value
  EXPECT_FALSE(a.shares_with(b));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, SharedOptional<ProcessContainer>(a_container("other")));
  EXPECT_NE(a, SharedOptional<ProcessContainer>());
  EXPECT_EQ(SharedOptional<ProcessContainer>(), SharedOptional<ProcessContainer>());
  // With T, with std::nullopt and with std::optional<T>, both ways round.
  EXPECT_TRUE(a == a_container());
  EXPECT_TRUE(a_container() == a);
  EXPECT_TRUE(a != a_container("other"));
  EXPECT_TRUE(a != std::nullopt);
  EXPECT_TRUE(std::nullopt != a);
  EXPECT_TRUE(SharedOptional<ProcessContainer>() == std::nullopt);
  const std::optional<ProcessContainer> same = a_container();
  const std::optional<ProcessContainer> none;
  EXPECT_TRUE(a == same);
  EXPECT_TRUE(same == a);
  EXPECT_TRUE(a != none);
  EXPECT_TRUE(none != a);
  EXPECT_TRUE(SharedOptional<ProcessContainer>() == none);
}

TEST(SharedOptional, InteroperatesWithStdOptional) {
  std::optional<ProcessContainer> from = a_container("from");
  SharedOptional<ProcessContainer> a = from;  // from std::optional<T>
  EXPECT_EQ(a->id, "from");
  a = std::optional<ProcessContainer>();  // assignment from an empty one
  EXPECT_FALSE(a);
  a = std::optional<ProcessContainer>(a_container("again"));
  EXPECT_EQ(a->id, "again");

  const std::optional<ProcessContainer> to = a;  // to std::optional<T>: a copy of the value
  ASSERT_TRUE(to);
  EXPECT_EQ(to->id, "again");
  const std::optional<ProcessContainer> empty = SharedOptional<ProcessContainer>();
  EXPECT_FALSE(empty);

  // A function that takes the std::optional by const reference gets a temporary.
  auto id_of = [](const std::optional<ProcessContainer>& o) { return o ? o->id : "none"; };
  EXPECT_EQ(id_of(a), "again");
}

TEST(SharedOptional, ValueOfARvalueMovesOutOfAnUnsharedBlock) {
  SharedOptional<std::string> a = std::string(100, 'x');
  const SharedOptional<std::string> b = a;  // NOLINT(performance-unnecessary-copy-*)
  std::string copied = *std::move(a);       // shared: a copy, b keeps its value
  EXPECT_EQ(copied, std::string(100, 'x'));
  EXPECT_EQ(*b, std::string(100, 'x'));
  SharedOptional<std::string> c = std::string(100, 'y');
  std::string taken = std::move(c).value();
  EXPECT_EQ(taken, std::string(100, 'y'));
  EXPECT_THROW((void)std::move(SharedOptional<std::string>()).value(), std::bad_optional_access);
}

TEST(SharedOptional, ProcessSampleCopiesShareItsPlacement) {
  ProcessSample p;
  p.container = a_container();
  p.slurm = SlurmJob{.job_id = "42", .step = "0", .uid = 1000u, .user = "alice"};
  p.pod = KubernetesPod{"trainer-0", "ml", "worker"};
  const ProcessSample copy = p;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy.container.shares_with(p.container));
  EXPECT_TRUE(copy.slurm.shares_with(p.slurm));
  EXPECT_TRUE(copy.pod.shares_with(p.pod));
  EXPECT_EQ(copy, p);
  p.slurm->step = "1";  // copy on write
  EXPECT_EQ(copy.slurm->step, "0");
  EXPECT_NE(copy, p);
}

TEST(SharedOptional, CopiesAndDropsFromManyThreadsFreeTheBlockOnce) {
  // Run under ThreadSanitizer/AddressSanitizer in CI: the count is atomic, the last owner frees.
  const SharedOptional<std::string> shared = std::string(200, 's');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&shared] {
      for (int i = 0; i < 10'000; ++i) {
        SharedOptional<std::string> mine = shared;
        SharedOptional<std::string> other = mine;
        ASSERT_EQ(other->size(), 200U);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.use_count(), 1);
}

}  // namespace
}  // namespace gpustream
