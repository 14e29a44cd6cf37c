// NameTable: fresh names are distinct identifiers that never take a reserved form, and naming
// is fast whatever the hints look like (a hint of reserved form once made it loop forever).
#include "codegen/CSource.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using coil::codegen::NameTable;

namespace {

/// The reserved forms the table must keep out of: prefix + digit, coil_..., __...
bool reservedForm(const std::string &name, const std::set<std::string> &prefixes) {
  if (name.rfind("coil_", 0) == 0 || name.rfind("__", 0) == 0) return true;
  for (const std::string &p : prefixes)
    if (name.size() > p.size() && name.compare(0, p.size(), p) == 0 &&
        std::isdigit(static_cast<unsigned char>(name[p.size()])))
      return true;
  return false;
}

} // namespace

TEST(NameTable, PlainHintsAreKeptAndNumbered) {
  NameTable t({"v", "n"});
  EXPECT_EQ(t.fresh("x"), "x");
  EXPECT_EQ(t.fresh("x"), "x_2");
  EXPECT_EQ(t.fresh("x"), "x_3");
  EXPECT_EQ(t.fresh("x_2"), "x_2_2");
  EXPECT_EQ(t.fresh("a.b/c"), "a_b_c");
  EXPECT_EQ(t.fresh("7up"), "_7up");
  EXPECT_EQ(t.fresh("int"), "int_2"); // keywords are taken
  t.reserve("begin");
  EXPECT_EQ(t.fresh("begin"), "begin_2");
}

// The regression of bert_sdpa_small.onnx: a weight named `n1.weight` while `n` is a reserved
// prefix (extents n0, n1, ...): every numbered candidate `n1_weight_K` had the reserved form.
TEST(NameTable, HintsOfReservedFormAreEscaped) {
  std::set<std::string> prefixes = {"v", "n", "acc"};
  NameTable t(prefixes);
  EXPECT_EQ(t.fresh("n1.weight"), "m_n1_weight");
  EXPECT_EQ(t.fresh("n1.weight"), "m_n1_weight_2");
  EXPECT_EQ(t.fresh("v0"), "m_v0");
  EXPECT_EQ(t.fresh("acc12"), "m_acc12");
  EXPECT_EQ(t.fresh("coil_x"), "m_coil_x");
  EXPECT_EQ(t.fresh("__y"), "m___y");
  EXPECT_EQ(t.fresh("coil"), "coil");   // not reserved itself...
  EXPECT_EQ(t.fresh("coil"), "m_coil"); // ...but coil_2 would be
  EXPECT_EQ(t.fresh(""), "_");
  EXPECT_EQ(t.fresh(""), "m__"); // __2 would be reserved
  EXPECT_EQ(t.fresh("m_coil"), "m_coil_2");
}

// 20,000 names over 8 colliding hints: a probe loop from 2 each time would take minutes.
TEST(NameTable, ManyCollidingHintsStayDistinct) {
  std::set<std::string> prefixes = {"v", "o", "d", "n", "acc", "red"};
  NameTable t(prefixes);
  std::set<std::string> seen;
  const char *hints[] = {"n1.weight", "v", "x", "coil", "", "acc0", "x_2", "d3"};
  for (int i = 0; i < 20000; ++i) {
    std::string name = t.fresh(hints[i % 8]);
    EXPECT_TRUE(seen.insert(name).second) << name;
    EXPECT_FALSE(reservedForm(name, prefixes)) << name;
  }
}

TEST(NameTable, PrefixesMustBeLetters) {
  EXPECT_ANY_THROW(NameTable({"v_"}));
  EXPECT_ANY_THROW(NameTable({""}));
}
