#include "wrapper/GraphExport.h"

#include "kernels/Externs.h"
#include "support/JsonQuote.h"
#include "support/Overloaded.h"
#include "wrapper/Lines.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace coil::wrapper {

namespace {

std::string q(std::string_view s) {
  return jsonQuote(s);
}

/// A JSON number that reads back exactly; non-finite values as the strings "nan", "inf",
/// "-inf" (JSON has no literal for them).
std::string jsonDouble(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  char buf[64];
  for (int prec = 15; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

const char *kindName(BufferKind k) {
  switch (k) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  case BufferKind::Constant:
    return "constant";
  case BufferKind::Intermediate:
    return "intermediate";
  }
  COIL_UNREACHABLE("bad buffer kind");
}

const char *placeName(ExternPlace p) {
  return p == ExternPlace::kDevice ? "device" : "host";
}

const char *externArgKind(ExternArg::Kind k) {
  switch (k) {
  case ExternArg::Kind::Buffer:
    return "buffer";
  case ExternArg::Kind::Output:
    return "output";
  case ExternArg::Kind::Size:
    return "size";
  case ExternArg::Kind::Float:
    return "float";
  case ExternArg::Kind::OutSymbol:
    return "out_symbol";
  }
  COIL_UNREACHABLE("bad extern arg kind");
}

std::string symList(const std::vector<SymInt> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + q(v[i].str());
  return s + "]";
}

template <class T> std::string intList(const std::vector<T> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string strList(const std::vector<std::string> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + q(v[i]);
  return s + "]";
}

std::string externArgs(const std::vector<ExternArg> &args) {
  std::string s = "[";
  for (size_t i = 0; i < args.size(); ++i) {
    const ExternArg &a = args[i];
    s += std::string(i ? ", " : "") + "{\"kind\": " + q(externArgKind(a.kind));
    switch (a.kind) {
    case ExternArg::Kind::Buffer:
    case ExternArg::Kind::Output:
      s += ", \"buffer\": " + std::to_string(a.buffer);
      break;
    case ExternArg::Kind::Size:
      s += ", \"value\": " + q(a.size.str());
      break;
    case ExternArg::Kind::Float:
      s += ", \"value\": " + jsonDouble(a.number);
      break;
    case ExternArg::Kind::OutSymbol:
      s += ", \"symbol\": " + q(a.symbol);
      break;
    }
    s += "}";
  }
  return s + "]";
}

/// The fields of a line after "kind", each preceded by ", ".
std::string lineFields(const Line &line) {
  std::ostringstream os;
  std::visit(
      Overloaded{
          [&](const Comment &l) { os << ", \"text\": " << q(l.text); },
          [&](const BindSymbol &l) {
            os << ", \"symbol\": " << q(l.symbol) << ", \"buffer\": " << l.buffer
               << ", \"dim\": " << l.dim;
          },
          [&](const Allocate &l) { os << ", \"buffer\": " << l.buffer; },
          [&](const Reuse &l) { os << ", \"from\": " << l.from << ", \"to\": " << l.to; },
          [&](const Reinterpret &l) {
            os << ", \"buffer\": " << l.buffer << ", \"base\": " << l.base
               << ", \"offset_bytes\": " << q(l.offsetBytes.str());
          },
          [&](const Free &l) { os << ", \"buffer\": " << l.buffer; },
          [&](const FreeIfNotReused &l) { os << ", \"buffer\": " << l.buffer; },
          [&](const KernelDefinition &l) { os << ", \"kernel\": " << l.kernel; },
          [&](const KernelCall &l) {
            os << ", \"kernel\": " << l.kernel << ", \"config\": " << l.config << ", \"args\": [";
            for (size_t i = 0; i < l.args.size(); ++i) {
              const CallArg &a = l.args[i];
              os << (i ? ", " : "");
              switch (a.kind) {
              case CallArg::Kind::Buffer:
                os << "{\"kind\": \"buffer\", \"buffer\": " << a.buffer << "}";
                break;
              case CallArg::Kind::Size:
                os << "{\"kind\": \"size\", \"value\": " << q(a.size.str()) << "}";
                break;
              case CallArg::Kind::Float:
                os << "{\"kind\": \"float\", \"value\": " << jsonDouble(a.number) << "}";
                break;
              }
            }
            os << "]";
            if (l.choices.empty()) return;
            os << ", \"bucket_size\": " << q(l.bucketSize.str()) << ", \"choices\": [";
            for (size_t i = 0; i < l.choices.size(); ++i) {
              const ConfigChoice &c = l.choices[i];
              os << (i ? ", " : "") << "{\"up_to\": " << c.upTo << ", \"config\": " << c.config
                 << ", \"at\": " << c.at;
              if (!c.timesUs.empty()) {
                os << ", \"times_us\": [";
                for (size_t t = 0; t < c.timesUs.size(); ++t)
                  os << (t ? ", " : "") << jsonDouble(c.timesUs[t]);
                os << "]";
              }
              os << "}";
            }
            os << "]";
          },
          [&](const ExternKernelOut &l) {
            os << ", \"function\": " << q(l.function) << ", \"place\": " << q(placeName(l.place));
            // A CUDA twin: the CPU function of the same extern and dtype (kernels/Externs.def).
            if (std::optional<kernels::ExternRef> r = kernels::findExtern(l.function); r && r->cuda)
              os << ", \"host_function\": " << q(kernels::cpuSymbol(r->id, r->dtype));
            os << ", \"args\": " << externArgs(l.args) << ", \"origins\": " << intList(l.origins);
          },
          [&](const ExternKernelAlloc &l) {
            os << ", \"function\": " << q(l.function) << ", \"place\": " << q(placeName(l.place))
               << ", \"args\": " << externArgs(l.args)
               << ", \"out_symbols\": " << strList(l.outSymbols)
               << ", \"origins\": " << intList(l.origins);
          },
          [&](const MultiOutput &l) {
            os << ", \"buffer\": " << l.buffer << ", \"source\": " << l.source
               << ", \"index\": " << l.index;
          },
          [&](const DebugPrint &l) {
            os << ", \"when\": "
               << (l.when == DebugPrint::When::Before ? "\"before\"" : "\"after\"")
               << ", \"launch\": " << q(l.launch) << ", \"values\": [";
            for (size_t i = 0; i < l.values.size(); ++i) {
              const DebugValue &v = l.values[i];
              os << (i ? ", " : "") << "{\"name\": " << q(v.name);
              switch (v.kind) {
              case DebugValue::Kind::Buffer:
                os << ", \"kind\": \"buffer\", \"buffer\": " << v.buffer;
                break;
              case DebugValue::Kind::Size:
                os << ", \"kind\": \"size\", \"value\": " << q(v.size.str());
                break;
              case DebugValue::Kind::Float:
                os << ", \"kind\": \"float\", \"value\": " << jsonDouble(v.number);
                break;
              }
              os << "}";
            }
            os << "]";
          },
          [&](const Synchronize &l) { os << ", \"for\": " << q(l.forCall); },
          [&](const HostAllocate &l) {
            os << ", \"buffer\": " << l.buffer << ", \"for\": " << q(l.forCall);
          },
          [&](const HostFree &l) { os << ", \"buffer\": " << l.buffer; },
          [&](const CopyToHost &l) {
            os << ", \"from\": " << l.from << ", \"to\": " << l.to << ", \"for\": " << q(l.forCall);
          },
          [&](const CopyToDevice &l) {
            os << ", \"from\": " << l.from << ", \"to\": " << l.to
               << ", \"allocate\": " << (l.allocate ? "true" : "false")
               << ", \"for\": " << q(l.forCall);
          }},
      line);
  return os.str();
}

} // namespace

std::string emitWrapperJson(const WrapperProgram &p) {
  std::ostringstream os;
  os << "{\n  \"schema\": \"coil-wrapper\",\n  \"schema_version\": " << kWrapperJsonVersion
     << ",\n  \"name\": " << q(p.name) << ",\n  \"device\": " << q(p.device)
     << ",\n  \"symbols\": [";
  bool first = true;
  for (const auto &[name, r] : p.symbols) {
    os << (first ? "\n    " : ",\n    ") << "{\"name\": " << q(name) << ", \"min\": " << r.min
       << ", \"max\": " << r.max << "}";
    first = false;
  }
  os << (first ? "]" : "\n  ]") << ",\n  \"arena_bytes\": " << q(p.arenaBytes.str())
     << ",\n  \"inputs\": " << intList(p.inputs) << ",\n  \"outputs\": " << intList(p.outputs)
     << ",\n  \"constants\": " << intList(p.constants) << ",\n  \"buffers\": [";
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer &buf = p.buffers[b];
    os << (b ? ",\n    " : "\n    ") << "{\"id\": " << b << ", \"name\": " << q(buf.name)
       << ", \"io_name\": " << q(buf.ioName.empty() ? buf.name : buf.ioName)
       << ", \"kind\": " << q(kindName(buf.kind)) << ", \"index\": " << buf.index
       << ", \"dtype\": " << q(dtypeName(buf.dtype)) << ", \"shape\": " << symList(buf.shape)
       << ", \"bytes\": " << q(buf.bytes().str()) << ", \"arena_offset\": "
       << (buf.arenaOffset ? q(buf.arenaOffset->str()) : std::string("null"))
       << ", \"memory\": " << (buf.memory == BufferMemory::kHost ? "\"host\"" : "\"program\"")
       << "}";
  }
  os << (p.buffers.empty() ? "]" : "\n  ]") << ",\n  \"kernels\": [";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelInfo &kn = p.kernels[k];
    os << (k ? ",\n    " : "\n    ") << "{\"id\": " << k << ", \"name\": " << q(kn.name)
       << ", \"source\": " << q(kn.sourceFile) << ",\n     \"params\": [";
    for (size_t i = 0; i < kn.params.size(); ++i) {
      const KernelParam &pr = kn.params[i];
      os << (i ? ", " : "") << "{\"name\": " << q(pr.name)
         << ", \"kind\": " << (pr.kind == KernelParam::Kind::Size ? "\"size\"" : "\"buffer\"");
      if (pr.kind == KernelParam::Kind::Buffer)
        os << ", \"dtype\": " << q(dtypeName(pr.dtype))
           << ", \"written\": " << (pr.written ? "true" : "false");
      os << "}";
    }
    os << "],\n     \"configs\": [";
    for (size_t c = 0; c < kn.configs.size(); ++c) {
      const KernelConfig &cf = kn.configs[c];
      os << (c ? ", " : "") << "{\"name\": " << q(cf.name) << ", \"launcher\": " << q(kn.entry(c))
         << ", \"values\": {";
      for (size_t v = 0; v < cf.values.size(); ++v)
        os << (v ? ", " : "") << q(cf.values[v].first) << ": " << cf.values[v].second;
      os << "}";
      if (cf.launch) {
        const LaunchPlan &lp = *cf.launch;
        os << ", \"launch\": {\"grid\": " << q(lp.grid.str()) << ", \"block\": " << lp.block;
        if (lp.vectorGrid) os << ", \"vector_grid\": " << q(lp.vectorGrid->str());
        if (lp.fallback >= 0)
          os << ", \"workspace_bytes\": " << q(lp.workspaceBytes.str())
             << ", \"fallback\": " << lp.fallback;
        os << "}";
      }
      os << "}";
    }
    os << "],\n     \"iteration_space\": " << symList(kn.iterationSpace)
       << ", \"origins\": " << intList(kn.origins) << "}";
  }
  os << (p.kernels.empty() ? "]" : "\n  ]") << ",\n  \"lines\": [";
  for (size_t i = 0; i < p.lines.size(); ++i)
    os << (i ? ",\n    " : "\n    ") << "{\"line\": " << i
       << ", \"kind\": " << q(lineKindName(p.lines[i])) << lineFields(p.lines[i]) << "}";
  os << (p.lines.empty() ? "]" : "\n  ]") << "\n}\n";
  return os.str();
}

namespace {

/// A DOT double-quoted string's contents.
std::string dotText(const std::string &s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n' || c == '\r') c = ' ';
    r += c;
  }
  return r;
}

/// A DOT label of several lines, each escaped.
std::string dotLines(const std::vector<std::string> &lines) {
  std::string r;
  for (size_t i = 0; i < lines.size(); ++i) r += (i ? "\\n" : "") + dotText(lines[i]);
  return r;
}

std::string plainList(const std::vector<SymInt> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s + "]";
}

std::string shapeText(const Buffer &b) {
  std::string s = std::string(dtypeName(b.dtype)) + "[";
  for (size_t d = 0; d < b.shape.size(); ++d) s += (d ? ", " : "") + b.shape[d].str();
  return s + "]";
}

} // namespace

std::string emitWrapperDot(const WrapperProgram &p) {
  std::ostringstream os;
  os << "// wrapper.dot of model '" << dotText(p.name)
     << "', generated by coil from its Wrapper IR: buffers (ellipses) and launches (boxes: "
        "kernels, hexagons: extern calls); solid edges carry data, dashed ones alias storage.\n"
     << "digraph \"" << dotText(p.name) << "\" {\n"
     << "  rankdir=TB;\n"
     << "  node [fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  // Buffers that no line mentions (never happens for a verified program) are still drawn.
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer &buf = p.buffers[b];
    const char *fill = "white";
    switch (buf.kind) {
    case BufferKind::Input:
      fill = "palegreen";
      break;
    case BufferKind::Output:
      fill = "lightsalmon";
      break;
    case BufferKind::Constant:
      fill = "lightgrey";
      break;
    case BufferKind::Intermediate:
      fill = "lightyellow";
      break;
    }
    std::string where = kindName(buf.kind);
    if (buf.kind == BufferKind::Input || buf.kind == BufferKind::Output ||
        buf.kind == BufferKind::Constant)
      where += " " + std::to_string(buf.index);
    if (buf.arenaOffset) where += " @ arena + " + buf.arenaOffset->str();
    if (buf.memory == BufferMemory::kHost) {
      fill = "lightcyan";
      where += " (host memory)";
    }
    std::string name = buf.name;
    if (!buf.ioName.empty() && buf.ioName != buf.name) name += " (" + buf.ioName + ")";
    os << "  b" << b << " [shape=ellipse, style=filled, fillcolor=" << fill << ", label=\""
       << dotLines({name, shapeText(buf), where}) << "\"];\n";
  }
  auto edge = [&](const std::string &from, const std::string &to, const std::string &attrs) {
    os << "  " << from << " -> " << to << (attrs.empty() ? "" : " [" + attrs + "]") << ";\n";
  };
  auto buf = [](BufferId b) { return "b" + std::to_string(b); };
  for (size_t i = 0; i < p.lines.size(); ++i) {
    const Line &line = p.lines[i];
    std::string node = "l" + std::to_string(i);
    std::visit(
        Overloaded{
            [&](const KernelCall &l) {
              const KernelInfo &k = p.kernels[l.kernel];
              std::vector<std::string> label = {k.entry(l.config)};
              if (size_t(l.config) < k.configs.size())
                label.push_back("config " + k.configs[size_t(l.config)].name);
              for (const ConfigChoice &c : l.choices)
                label.push_back(l.bucketSize.str() + " <= " + std::to_string(c.upTo) + ": c" +
                                std::to_string(c.config));
              if (!k.iterationSpace.empty())
                label.push_back("iterations " + plainList(k.iterationSpace));
              os << "  " << node << " [shape=box, style=\"rounded,filled\", fillcolor=lightblue, "
                 << "label=\"" << dotLines(label) << "\"];\n";
              for (size_t a = 0; a < l.args.size(); ++a) {
                if (l.args[a].kind != CallArg::Kind::Buffer) continue;
                bool written = a < k.params.size() && k.params[a].written;
                std::string pname = a < k.params.size() ? k.params[a].name : "";
                std::string attrs = "label=\"" + dotText(pname) + "\"";
                if (written)
                  edge(node, buf(l.args[a].buffer), attrs);
                else
                  edge(buf(l.args[a].buffer), node, attrs);
              }
            },
            [&](const ExternKernelOut &l) {
              os << "  " << node << " [shape=hexagon, style=filled, fillcolor=plum, label=\""
                 << dotText(l.function) << "\"];\n";
              for (const ExternArg &a : l.args) {
                if (a.kind == ExternArg::Kind::Buffer) edge(buf(a.buffer), node, "");
                if (a.kind == ExternArg::Kind::Output) edge(node, buf(a.buffer), "");
              }
            },
            [&](const ExternKernelAlloc &l) {
              std::string note = "allocates its outputs";
              for (const std::string &s : l.outSymbols) note += ", defines " + s;
              os << "  " << node << " [shape=hexagon, style=filled, fillcolor=plum, label=\""
                 << dotLines({l.function, note}) << "\"];\n";
              for (const ExternArg &a : l.args) {
                if (a.kind == ExternArg::Kind::Buffer) edge(buf(a.buffer), node, "");
                if (a.kind == ExternArg::Kind::Output) edge(node, buf(a.buffer), "");
              }
            },
            [&](const Reuse &l) { edge(buf(l.from), buf(l.to), "style=dashed, label=\"reuse\""); },
            [&](const Reinterpret &l) {
              edge(buf(l.base), buf(l.buffer),
                   "style=dashed, label=\"view +" + dotText(l.offsetBytes.str()) + "\"");
            },
            [&](const MultiOutput &l) {
              if (l.buffer == l.source) return;
              edge(buf(l.source), buf(l.buffer),
                   "style=dashed, label=\"output " + std::to_string(l.index) + "\"");
            },
            [&](const CopyToHost &l) { edge(buf(l.from), buf(l.to), "label=\"to host\""); },
            [&](const CopyToDevice &l) { edge(buf(l.from), buf(l.to), "label=\"to device\""); },
            [&](const auto &) {}},
        line);
  }
  os << "}\n";
  return os.str();
}

} // namespace coil::wrapper
