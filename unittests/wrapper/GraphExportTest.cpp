// The graph export backend: wrapper.json of a program with every line kind, parsed back with the
// runtime's JSON parser and checked field by field against the program; wrapper.dot's nodes and
// edges; determinism.
#include "wrapper/GraphExport.h"

#include "GraphExportTestProgram.h"
#include "runtime/Json.h"
#include "wrapper/HostCopies.h"

#include <cmath>

namespace coil::wrapper::testing {
namespace {

const json::Value &at(const json::Value &v, const char *key) {
  const json::Value *m = v.get(key);
  static const json::Value null;
  EXPECT_NE(m, nullptr) << "missing field '" << key << "'";
  return m ? *m : null;
}

int64_t intOf(const json::Value &v, const char *key) {
  std::optional<int64_t> i = at(v, key).asInt();
  EXPECT_TRUE(i.has_value()) << "'" << key << "' is not an integer";
  return i.value_or(-999);
}

std::string strOf(const json::Value &v, const char *key) {
  const json::Value &m = at(v, key);
  EXPECT_TRUE(m.isString()) << "'" << key << "' is not a string";
  return m.text;
}

/// A size field: SymInt text that parses back to the same expression.
void expectSize(const json::Value &v, const SymInt &want) {
  ASSERT_TRUE(v.isString());
  Expected<SymInt> got = parseSymInt(v.text);
  ASSERT_TRUE(got.ok()) << v.text;
  EXPECT_EQ(*got, want) << v.text << " vs " << want.str();
}

void expectFloat(const json::Value &v, double want) {
  if (std::isnan(want)) {
    EXPECT_EQ(v.text, "nan");
  } else if (std::isinf(want)) {
    EXPECT_EQ(v.text, want > 0 ? "inf" : "-inf");
  } else {
    ASSERT_EQ(v.kind, json::Value::Kind::Number);
    EXPECT_EQ(v.asDouble(), want);
  }
}

/// The field names of an object, for exact-set checks.
std::set<std::string> keys(const json::Value &v) {
  std::set<std::string> k;
  for (const auto &[name, m] : v.members) k.insert(name);
  return k;
}

void expectExternArgs(const json::Value &arr, const std::vector<ExternArg> &args) {
  ASSERT_EQ(arr.items.size(), args.size());
  const char *kinds[] = {"buffer", "output", "size", "float", "out_symbol"};
  for (size_t i = 0; i < args.size(); ++i) {
    const json::Value &a = arr.items[i];
    const ExternArg &w = args[i];
    EXPECT_EQ(strOf(a, "kind"), kinds[int(w.kind)]);
    switch (w.kind) {
    case ExternArg::Kind::Buffer:
    case ExternArg::Kind::Output:
      EXPECT_EQ(intOf(a, "buffer"), w.buffer);
      break;
    case ExternArg::Kind::Size:
      expectSize(at(a, "value"), w.size);
      break;
    case ExternArg::Kind::Float:
      expectFloat(at(a, "value"), w.number);
      break;
    case ExternArg::Kind::OutSymbol:
      EXPECT_EQ(strOf(a, "symbol"), w.symbol);
      break;
    }
  }
}

void expectLine(const json::Value &j, const Line &line) {
  EXPECT_EQ(strOf(j, "kind"), lineKindName(line));
  std::visit(
      [&](const auto &l) {
        using T = std::decay_t<decltype(l)>;
        std::set<std::string> k = keys(j);
        if constexpr (std::is_same_v<T, Comment>) {
          EXPECT_EQ(strOf(j, "text"), l.text);
          EXPECT_EQ(k, (std::set<std::string>{"line", "kind", "text"}));
        } else if constexpr (std::is_same_v<T, BindSymbol>) {
          EXPECT_EQ(strOf(j, "symbol"), l.symbol);
          EXPECT_EQ(intOf(j, "buffer"), l.buffer);
          EXPECT_EQ(intOf(j, "dim"), l.dim);
          EXPECT_EQ(k.size(), 5u);
        } else if constexpr (std::is_same_v<T, Allocate> || std::is_same_v<T, Free> ||
                             std::is_same_v<T, FreeIfNotReused>) {
          EXPECT_EQ(intOf(j, "buffer"), l.buffer);
          EXPECT_EQ(k.size(), 3u);
        } else if constexpr (std::is_same_v<T, Reuse>) {
          EXPECT_EQ(intOf(j, "from"), l.from);
          EXPECT_EQ(intOf(j, "to"), l.to);
          EXPECT_EQ(k.size(), 4u);
        } else if constexpr (std::is_same_v<T, Reinterpret>) {
          EXPECT_EQ(intOf(j, "buffer"), l.buffer);
          EXPECT_EQ(intOf(j, "base"), l.base);
          expectSize(at(j, "offset_bytes"), l.offsetBytes);
          EXPECT_EQ(k.size(), 5u);
        } else if constexpr (std::is_same_v<T, KernelDefinition>) {
          EXPECT_EQ(intOf(j, "kernel"), l.kernel);
          EXPECT_EQ(k.size(), 3u);
        } else if constexpr (std::is_same_v<T, KernelCall>) {
          EXPECT_EQ(intOf(j, "kernel"), l.kernel);
          EXPECT_EQ(intOf(j, "config"), l.config);
          const json::Value &args = at(j, "args");
          ASSERT_EQ(args.items.size(), l.args.size());
          for (size_t i = 0; i < l.args.size(); ++i) {
            const json::Value &a = args.items[i];
            switch (l.args[i].kind) {
            case CallArg::Kind::Buffer:
              EXPECT_EQ(strOf(a, "kind"), "buffer");
              EXPECT_EQ(intOf(a, "buffer"), l.args[i].buffer);
              break;
            case CallArg::Kind::Size:
              EXPECT_EQ(strOf(a, "kind"), "size");
              expectSize(at(a, "value"), l.args[i].size);
              break;
            case CallArg::Kind::Float:
              EXPECT_EQ(strOf(a, "kind"), "float");
              expectFloat(at(a, "value"), l.args[i].number);
              break;
            }
          }
          EXPECT_EQ(k.size(), 5u);
        } else if constexpr (std::is_same_v<T, ExternKernelOut>) {
          EXPECT_EQ(strOf(j, "function"), l.function);
          expectExternArgs(at(j, "args"), l.args);
          ASSERT_EQ(at(j, "origins").items.size(), l.origins.size());
          EXPECT_EQ(strOf(j, "place"), l.place == ExternPlace::kDevice ? "device" : "host");
          // A CUDA twin of the extern table names its CPU function.
          if (const json::Value *h = j.get("host_function")) {
            EXPECT_EQ(l.place, ExternPlace::kDevice);
            EXPECT_EQ(k.size(), 7u);
          } else {
            EXPECT_EQ(k.size(), 6u);
          }
        } else if constexpr (std::is_same_v<T, ExternKernelAlloc>) {
          EXPECT_EQ(strOf(j, "function"), l.function);
          EXPECT_EQ(strOf(j, "place"), l.place == ExternPlace::kDevice ? "device" : "host");
          expectExternArgs(at(j, "args"), l.args);
          const json::Value &syms = at(j, "out_symbols");
          ASSERT_EQ(syms.items.size(), l.outSymbols.size());
          for (size_t i = 0; i < l.outSymbols.size(); ++i)
            EXPECT_EQ(syms.items[i].text, l.outSymbols[i]);
          const json::Value &origins = at(j, "origins");
          ASSERT_EQ(origins.items.size(), l.origins.size());
          for (size_t i = 0; i < l.origins.size(); ++i)
            EXPECT_EQ(origins.items[i].asInt(), l.origins[i]);
          EXPECT_EQ(k.size(), 7u);
        } else if constexpr (std::is_same_v<T, MultiOutput>) {
          EXPECT_EQ(intOf(j, "buffer"), l.buffer);
          EXPECT_EQ(intOf(j, "source"), l.source);
          EXPECT_EQ(intOf(j, "index"), l.index);
          EXPECT_EQ(k.size(), 5u);
        } else if constexpr (std::is_same_v<T, DebugPrint>) {
          EXPECT_EQ(strOf(j, "when"), l.when == DebugPrint::When::Before ? "before" : "after");
          EXPECT_EQ(strOf(j, "launch"), l.launch);
          const json::Value &vals = at(j, "values");
          ASSERT_EQ(vals.items.size(), l.values.size());
          for (size_t i = 0; i < l.values.size(); ++i) {
            const json::Value &v = vals.items[i];
            const DebugValue &w = l.values[i];
            EXPECT_EQ(strOf(v, "name"), w.name);
            switch (w.kind) {
            case DebugValue::Kind::Buffer:
              EXPECT_EQ(strOf(v, "kind"), "buffer");
              EXPECT_EQ(intOf(v, "buffer"), w.buffer);
              break;
            case DebugValue::Kind::Size:
              EXPECT_EQ(strOf(v, "kind"), "size");
              expectSize(at(v, "value"), w.size);
              break;
            case DebugValue::Kind::Float:
              EXPECT_EQ(strOf(v, "kind"), "float");
              expectFloat(at(v, "value"), w.number);
              break;
            }
          }
          EXPECT_EQ(k.size(), 5u);
        } else if constexpr (std::is_same_v<T, Synchronize>) {
          EXPECT_EQ(strOf(j, "for"), l.forCall);
          EXPECT_EQ(k.size(), 3u);
        } else if constexpr (std::is_same_v<T, HostAllocate>) {
          EXPECT_EQ(intOf(j, "buffer"), l.buffer);
          EXPECT_EQ(strOf(j, "for"), l.forCall);
          EXPECT_EQ(k.size(), 4u);
        } else if constexpr (std::is_same_v<T, HostFree>) {
          EXPECT_EQ(intOf(j, "buffer"), l.buffer);
          EXPECT_EQ(k.size(), 3u);
        } else if constexpr (std::is_same_v<T, CopyToHost>) {
          EXPECT_EQ(intOf(j, "from"), l.from);
          EXPECT_EQ(intOf(j, "to"), l.to);
          EXPECT_EQ(strOf(j, "for"), l.forCall);
          EXPECT_EQ(k.size(), 5u);
        } else if constexpr (std::is_same_v<T, CopyToDevice>) {
          EXPECT_EQ(intOf(j, "from"), l.from);
          EXPECT_EQ(intOf(j, "to"), l.to);
          EXPECT_EQ(at(j, "allocate").boolean, l.allocate);
          EXPECT_EQ(strOf(j, "for"), l.forCall);
          EXPECT_EQ(k.size(), 6u);
        } else {
          static_assert(sizeof(T) == 0, "a line kind without export checks");
        }
      },
      line);
}

TEST(GraphExport, JsonParsesBackToTheProgram) {
  // As a CUDA program with its host fallbacks written out: every line kind occurs.
  WrapperProgram p = everyLineKind();
  p.device = "cuda";
  insertHostCopies(p);
  std::string text = emitWrapperJson(p);
  Expected<json::Value> parsed = json::parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().render() << "\n" << text;
  const json::Value &j = *parsed;
  EXPECT_EQ(strOf(j, "schema"), "coil-wrapper");
  EXPECT_EQ(intOf(j, "schema_version"), kWrapperJsonVersion);
  EXPECT_EQ(strOf(j, "name"), p.name);
  EXPECT_EQ(strOf(j, "device"), p.device);
  expectSize(at(j, "arena_bytes"), p.arenaBytes);
  const json::Value &syms = at(j, "symbols");
  ASSERT_EQ(syms.items.size(), p.symbols.size());
  size_t si = 0;
  for (const auto &[name, r] : p.symbols) {
    EXPECT_EQ(strOf(syms.items[si], "name"), name);
    EXPECT_EQ(intOf(syms.items[si], "min"), r.min);
    EXPECT_EQ(intOf(syms.items[si], "max"), r.max);
    ++si;
  }
  auto ids = [&](const char *key, const std::vector<BufferId> &want) {
    const json::Value &v = at(j, key);
    ASSERT_EQ(v.items.size(), want.size()) << key;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(v.items[i].asInt(), want[i]) << key;
  };
  ids("inputs", p.inputs);
  ids("outputs", p.outputs);
  ids("constants", p.constants);

  const json::Value &bufs = at(j, "buffers");
  ASSERT_EQ(bufs.items.size(), p.buffers.size());
  const char *kinds[] = {"input", "output", "constant", "intermediate"};
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const json::Value &v = bufs.items[b];
    const Buffer &w = p.buffers[b];
    EXPECT_EQ(intOf(v, "id"), int64_t(b));
    EXPECT_EQ(strOf(v, "name"), w.name);
    EXPECT_EQ(strOf(v, "io_name"), w.ioName.empty() ? w.name : w.ioName);
    EXPECT_EQ(strOf(v, "kind"), kinds[int(w.kind)]);
    EXPECT_EQ(intOf(v, "index"), w.index);
    EXPECT_EQ(strOf(v, "dtype"), dtypeName(w.dtype));
    const json::Value &shape = at(v, "shape");
    ASSERT_EQ(shape.items.size(), w.shape.size());
    for (size_t d = 0; d < w.shape.size(); ++d) expectSize(shape.items[d], w.shape[d]);
    expectSize(at(v, "bytes"), w.bytes());
    if (w.arenaOffset)
      expectSize(at(v, "arena_offset"), *w.arenaOffset);
    else
      EXPECT_EQ(at(v, "arena_offset").kind, json::Value::Kind::Null);
    EXPECT_EQ(strOf(v, "memory"), w.memory == BufferMemory::kHost ? "host" : "program");
    EXPECT_EQ(keys(v).size(), 10u);
  }

  const json::Value &kernels = at(j, "kernels");
  ASSERT_EQ(kernels.items.size(), p.kernels.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const json::Value &v = kernels.items[k];
    const KernelInfo &w = p.kernels[k];
    EXPECT_EQ(intOf(v, "id"), int64_t(k));
    EXPECT_EQ(strOf(v, "name"), w.name);
    EXPECT_EQ(strOf(v, "source"), w.sourceFile);
    const json::Value &params = at(v, "params");
    ASSERT_EQ(params.items.size(), w.params.size());
    for (size_t i = 0; i < w.params.size(); ++i) {
      const json::Value &pv = params.items[i];
      EXPECT_EQ(strOf(pv, "name"), w.params[i].name);
      bool isSize = w.params[i].kind == KernelParam::Kind::Size;
      EXPECT_EQ(strOf(pv, "kind"), isSize ? "size" : "buffer");
      if (!isSize) {
        EXPECT_EQ(strOf(pv, "dtype"), dtypeName(w.params[i].dtype));
        EXPECT_EQ(at(pv, "written").boolean, w.params[i].written);
      }
    }
    const json::Value &configs = at(v, "configs");
    ASSERT_EQ(configs.items.size(), w.configs.size());
    for (size_t c = 0; c < w.configs.size(); ++c) {
      const json::Value &cv = configs.items[c];
      EXPECT_EQ(strOf(cv, "name"), w.configs[c].name);
      EXPECT_EQ(strOf(cv, "launcher"), w.name + "_c" + std::to_string(c));
      const json::Value &vals = at(cv, "values");
      ASSERT_EQ(vals.members.size(), w.configs[c].values.size());
      for (size_t i = 0; i < vals.members.size(); ++i) {
        EXPECT_EQ(vals.members[i].first, w.configs[c].values[i].first);
        EXPECT_EQ(vals.members[i].second.asInt(), w.configs[c].values[i].second);
      }
    }
    const json::Value &space = at(v, "iteration_space");
    ASSERT_EQ(space.items.size(), w.iterationSpace.size());
    for (size_t d = 0; d < w.iterationSpace.size(); ++d)
      expectSize(space.items[d], w.iterationSpace[d]);
    const json::Value &origins = at(v, "origins");
    ASSERT_EQ(origins.items.size(), w.origins.size());
  }

  const json::Value &lines = at(j, "lines");
  ASSERT_EQ(lines.items.size(), p.lines.size());
  std::set<std::string> seenKinds;
  for (size_t i = 0; i < p.lines.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i) + " " + lineKindName(p.lines[i]));
    EXPECT_EQ(intOf(lines.items[i], "line"), int64_t(i));
    expectLine(lines.items[i], p.lines[i]);
    seenKinds.insert(lineKindName(p.lines[i]));
  }
  EXPECT_EQ(seenKinds.size(), std::variant_size_v<Line>) << "the program misses a line kind";
}

TEST(GraphExport, DotHasBuffersLaunchesAndEdges) {
  WrapperProgram p = everyLineKind();
  std::string dot = emitWrapperDot(p);
  EXPECT_EQ(dot.rfind("// wrapper.dot of model 'every \\\"kind\\\"'", 0), 0u) << dot;
  EXPECT_NE(dot.find("digraph \"every \\\"kind\\\"\" {"), std::string::npos) << dot;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    EXPECT_NE(dot.find("  b" + std::to_string(b) + " [shape=ellipse"), std::string::npos) << b;
  for (size_t i = 0; i < p.lines.size(); ++i) {
    const Line &l = p.lines[i];
    std::string node = "  l" + std::to_string(i) + " [";
    bool launch = std::holds_alternative<KernelCall>(l) ||
                  std::holds_alternative<ExternKernelOut>(l) ||
                  std::holds_alternative<ExternKernelAlloc>(l);
    EXPECT_EQ(dot.find(node) != std::string::npos, launch) << "line " << i;
  }
  // The kernel reads x and writes t (by its params' `written`), with the param names.
  EXPECT_NE(dot.find("  b0 -> l4 [label=\"x\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("  l4 -> b4 [label=\"t\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"k_c1\\nconfig cfg1\\niterations [N, 4]\""), std::string::npos) << dot;
  // Aliases are dashed: the view, the reuse and MultiOutput (not for a buffer of its own).
  EXPECT_NE(dot.find("  b4 -> b5 [style=dashed, label=\"view +16\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("  b4 -> b6 [style=dashed, label=\"reuse\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("  b2 -> b3 [style=dashed, label=\"output 1\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("allocates its outputs, defines U"), std::string::npos) << dot;
}

TEST(GraphExport, Deterministic) {
  WrapperProgram p = everyLineKind();
  EXPECT_EQ(emitWrapperJson(p), emitWrapperJson(everyLineKind()));
  EXPECT_EQ(emitWrapperDot(p), emitWrapperDot(everyLineKind()));
}

} // namespace
} // namespace coil::wrapper::testing
