// gpustream/split_list.hpp: the CLI's comma lists (--probes, --nats) trim blanks, the Python
// module's probes=/devices= strings keep them; both leave empty items out.
#include "gpustream/split_list.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using gpustream::ListBlanks;
using gpustream::split_list;
using List = std::vector<std::string>;

TEST(SplitList, TrimDropsBlanksAroundItemsAndEmptyItems) {
  EXPECT_EQ(split_list("a,b, c", ListBlanks::trim), (List{"a", "b", "c"}));
  EXPECT_EQ(split_list(" \ta \t,,  ,b,", ListBlanks::trim), (List{"a", "b"}));
  EXPECT_EQ(split_list("a b , c", ListBlanks::trim), (List{"a b", "c"}));
  EXPECT_EQ(split_list("", ListBlanks::trim), List{});
  EXPECT_EQ(split_list(" , ", ListBlanks::trim), List{});
}

TEST(SplitList, KeepLeavesBlanksAndDropsOnlyEmptyItems) {
  EXPECT_EQ(split_list("a,b, c", ListBlanks::keep), (List{"a", "b", " c"}));
  EXPECT_EQ(split_list(",a,,b,", ListBlanks::keep), (List{"a", "b"}));
  EXPECT_EQ(split_list(" , ", ListBlanks::keep), (List{" ", " "}));
  EXPECT_EQ(split_list("", ListBlanks::keep), List{});
  EXPECT_EQ(split_list("nvidia", ListBlanks::keep), List{"nvidia"});
}

}  // namespace
