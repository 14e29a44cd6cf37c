#include "Pictures.h"

#include "wrapper/DebugInstrument.h"
#include "wrapper/Lines.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace coil::cli {

namespace {

using namespace coil::wrapper;

std::string esc(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string clip(const std::string &s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

/// A long name keeps its start and its end (where ONNX exporters put what tells layers apart).
std::string clipMiddle(const std::string &s, size_t n) {
  if (s.size() <= n) return s;
  size_t head = (n - 3) / 3;
  return s.substr(0, head) + "..." + s.substr(s.size() - (n - 3 - head));
}

/// Monospace text at font-size 12: about 7.2 px a character.
double textWidth(const std::string &s) {
  return 7.2 * double(s.size());
}

std::string bytesText(int64_t b) {
  char buf[32];
  if (b >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(int64_t(1) << 30));
  else if (b >= (int64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld B", (long long)b);
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

const char *kStyle = R"(<style>
  text { font-family: monospace; font-size: 12px; fill: #1f2937; }
  .title { font-size: 15px; font-weight: bold; }
  .note { fill: #4b5563; }
  .step.kernel > rect.box { fill: #dbeafe; stroke: #3b82f6; }
  .step.extern > rect.box { fill: #fef3c7; stroke: #d97706; }
  .node rect { fill: #ffffff; stroke: #9ca3af; }
  .repeat > rect.frame { fill: none; stroke: #6b7280; stroke-dasharray: 6 4; }
  .repeat > text { font-weight: bold; fill: #374151; }
  .axis { stroke: #6b7280; }
  .buffer { stroke: #1f2937; stroke-width: 0.5; }
</style>
)";

std::string svgDocument(double width, double height, const std::string &body) {
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
     << num(height) << "\" viewBox=\"0 0 " << num(width) << " " << num(height) << "\">\n"
     << kStyle << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
     << body << "</svg>\n";
  return os.str();
}

// --- fusion --------------------------------------------------------------------------------

struct Chip {
  std::string label, title;
};

struct Step {
  std::string name, kind, function; // kind "kernel" or "extern"
  std::vector<Chip> chips;
  std::vector<std::string> from; // the launches whose outputs it reads, in launch order
  std::string signature;         // what makes two launches the same for collapsing
};

std::vector<Step> fusionSteps(const Graph &g, const WrapperProgram &p) {
  std::vector<LaunchInfo> table = launchTable(p);
  std::map<BufferId, size_t> writer; // buffer -> the launch that wrote it last
  std::map<BufferId, BufferId> alias;
  std::vector<Step> steps;
  size_t t = 0;
  for (size_t li = 0; li < p.lines.size(); ++li) {
    const Line &l = p.lines[li];
    if (const auto *r = std::get_if<Reinterpret>(&l)) alias[r->buffer] = r->base;
    if (const auto *m = std::get_if<MultiOutput>(&l)) alias[m->buffer] = m->source;
    if (const auto *r = std::get_if<Reuse>(&l)) alias[r->to] = r->from;
    if (t >= table.size() || table[t].line != li) continue;
    const LaunchInfo &info = table[t++];
    Step s;
    s.name = info.name;
    s.kind = info.isExtern ? "extern" : "kernel";
    s.function = info.isExtern ? info.base : "";
    std::vector<int32_t> origins;
    if (const auto *k = std::get_if<KernelCall>(&l))
      origins = p.kernels[size_t(k->kernel)].origins;
    else if (const auto *e = std::get_if<ExternKernelOut>(&l))
      origins = e->origins;
    else if (const auto *e = std::get_if<ExternKernelAlloc>(&l))
      origins = e->origins;
    std::sort(origins.begin(), origins.end());
    origins.erase(std::unique(origins.begin(), origins.end()), origins.end());
    std::set<BufferId> writes(info.writes.begin(), info.writes.end());
    std::set<size_t> from;
    for (BufferId b : lineEffects(l).uses) {
      if (writes.count(b)) continue;
      BufferId x = b;
      for (int hops = 0; !writer.count(x) && alias.count(x) && hops < 64; ++hops) x = alias[x];
      if (writer.count(x)) from.insert(writer[x]);
    }
    for (size_t f : from) s.from.push_back(steps[f].name);
    for (BufferId b : info.writes) writer[b] = steps.size();
    std::multiset<std::string> ops;
    for (int32_t o : origins) {
      if (o < 0 || size_t(o) >= g.nodes().size()) continue;
      const Node &n = g.nodes()[size_t(o)];
      std::string op(opName(n.op));
      std::string name = n.name.empty() ? "#" + std::to_string(o) : n.name;
      std::string weights;
      int count = 0;
      for (ValueId v : n.inputs)
        if (v >= 0 && g.isConstant(v)) {
          ++count;
          weights += (weights.empty() ? "" : ", ") + g.value(v).name + " " + g.value(v).type.str();
        }
      Chip c;
      c.label = clipMiddle(name, 34) + " (" + op + ")" +
                (count ? " +" + std::to_string(count) + (count == 1 ? " weight" : " weights") : "");
      c.title = name + " (" + op + ")" + (weights.empty() ? "" : "; weights: " + weights);
      s.chips.push_back(std::move(c));
      ops.insert(op);
    }
    s.signature = s.kind + "|" + s.function + "|";
    for (const std::string &op : ops) s.signature += op + ",";
    steps.push_back(std::move(s));
  }
  return steps;
}

struct Block {
  size_t begin = 0, period = 1, count = 1;
};

/// Runs of a repeated sequence of launches (same kinds, functions and ops), greedily from the
/// first launch, the run covering the most launches first.
std::vector<Block> repeatedBlocks(const std::vector<Step> &s) {
  std::vector<Block> out;
  size_t n = s.size();
  auto same = [&](size_t a, size_t b, size_t len) {
    for (size_t k = 0; k < len; ++k)
      if (s[a + k].signature != s[b + k].signature) return false;
    return true;
  };
  for (size_t i = 0; i < n;) {
    Block best{i, 1, 1};
    for (size_t period = 1; period <= std::min<size_t>(128, (n - i) / 2); ++period) {
      size_t count = 1;
      while (i + (count + 1) * period <= n && same(i, i + count * period, period)) ++count;
      if (count >= 2 && period * count > best.period * best.count) best = {i, period, count};
    }
    out.push_back(best);
    i += best.period * best.count;
  }
  return out;
}

} // namespace

std::string fusionSvg(const Graph &g, const WrapperProgram &p, const std::string &title) {
  std::vector<Step> steps = fusionSteps(g, p);
  std::vector<Block> blocks = repeatedBlocks(steps);
  constexpr double kWidth = 980, kMargin = 16, kIndent = 34, kRow = 24, kMaxChips = 48;
  std::ostringstream body;
  size_t kernels = 0, externs = 0, drawn = 0;
  for (const Step &s : steps) (s.kind == "kernel" ? kernels : externs)++;
  double y = 66;
  auto drawStep = [&](const Step &s, double x, size_t index) {
    double w = kWidth - x - kMargin;
    std::string header = s.name + "  " + (s.kind == "kernel" ? "kernel" : "extern " + s.function);
    std::string from;
    for (size_t i = 0; i < s.from.size() && i < 4; ++i) from += (i ? ", " : "") + s.from[i];
    if (s.from.size() > 4) from += ", +" + std::to_string(s.from.size() - 4);
    // Chips in rows.
    std::ostringstream chips;
    double cx = x + 10, cy = y + 30;
    size_t shown = 0;
    for (const Chip &c : s.chips) {
      std::string label = c.label;
      if (shown == size_t(kMaxChips)) {
        label = "+" + std::to_string(s.chips.size() - shown) + " more nodes";
      }
      double cw = textWidth(label) + 14;
      if (cx + cw > x + w - 10 && cx > x + 10) {
        cx = x + 10;
        cy += kRow;
      }
      if (shown == size_t(kMaxChips)) {
        chips << "  <text class=\"note\" x=\"" << num(cx + 4) << "\" y=\"" << num(cy + 14) << "\">"
              << esc(label) << "</text>\n";
        break;
      }
      chips << "  <g class=\"node\"><title>" << esc(c.title) << "</title><rect x=\"" << num(cx)
            << "\" y=\"" << num(cy) << "\" width=\"" << num(cw) << "\" height=\"19\" rx=\"4\"/>"
            << "<text x=\"" << num(cx + 7) << "\" y=\"" << num(cy + 14) << "\">" << esc(label)
            << "</text></g>\n";
      cx += cw + 8;
      ++shown;
    }
    double h = (s.chips.empty() ? 30 : cy + 19 + 8 - y);
    body << " <g class=\"step " << s.kind << "\" data-name=\"" << esc(s.name) << "\" data-index=\""
         << index << "\" data-nodes=\"" << s.chips.size() << "\"><title>" << esc(s.name)
         << (from.empty() ? "" : ", reads the outputs of " + esc(from)) << "</title>\n"
         << "  <rect class=\"box\" x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w)
         << "\" height=\"" << num(h) << "\" rx=\"6\"/>\n"
         << "  <text x=\"" << num(x + 10) << "\" y=\"" << num(y + 18) << "\"><tspan "
         << "font-weight=\"bold\">" << esc(s.name) << "</tspan>  "
         << esc(s.kind == "kernel" ? "kernel" : "extern " + s.function) << "</text>\n";
    if (!from.empty())
      body << "  <text class=\"note\" x=\"" << num(x + w - 10) << "\" y=\"" << num(y + 18)
           << "\" text-anchor=\"end\">" << esc("<- " + from) << "</text>\n";
    body << chips.str() << " </g>\n";
    (void)header;
    y += h + 8;
    ++drawn;
  };
  for (const Block &b : blocks) {
    if (b.count == 1) {
      drawStep(steps[b.begin], kMargin, b.begin);
      continue;
    }
    double top = y;
    y += 26;
    std::ostringstream saved;
    saved << body.str();
    body.str("");
    for (size_t k = 0; k < b.period; ++k)
      drawStep(steps[b.begin + k], kMargin + kIndent, b.begin + k);
    std::string inner = body.str();
    body.str("");
    body << saved.str();
    const Step &first = steps[b.begin], &last = steps[b.begin + b.period * b.count - 1];
    body << " <g class=\"repeat\" data-count=\"" << b.count << "\" data-period=\"" << b.period
         << "\" data-first=\"" << esc(first.name) << "\" data-last=\"" << esc(last.name) << "\">\n"
         << "  <rect class=\"frame\" x=\"" << num(kMargin) << "\" y=\"" << num(top) << "\" width=\""
         << num(kWidth - 2 * kMargin) << "\" height=\"" << num(y - top) << "\" rx=\"8\"/>\n"
         << "  <text x=\"" << num(kMargin + 10) << "\" y=\"" << num(top + 18) << "\">"
         << esc("x " + std::to_string(b.count) + ": " + std::to_string(b.period) +
                (b.period == 1 ? " launch" : " launches") + " repeated " + std::to_string(b.count) +
                " times (" + first.name + " .. " + last.name + "), drawn once")
         << "</text>\n"
         << inner << " </g>\n";
    y += 8;
  }
  std::ostringstream head;
  head << " <text class=\"title\" x=\"" << num(kMargin) << "\" y=\"24\">" << esc(title)
       << ": graph nodes by the launch that runs them</text>\n"
       << " <text class=\"note\" x=\"" << num(kMargin) << "\" y=\"46\">"
       << esc(std::to_string(steps.size()) + " launches (" + std::to_string(kernels) +
              " kernels, " + std::to_string(externs) + " extern calls) of " +
              std::to_string(g.nodes().size()) + " graph nodes in execution order, " +
              std::to_string(drawn) + " drawn (blue: kernels, amber: extern calls)")
       << "</text>\n";
  return svgDocument(kWidth, y + kMargin, head.str() + body.str());
}

// --- memory --------------------------------------------------------------------------------

std::string memorySvg(const WrapperProgram &p, const MemoryReport &r, const std::string &title) {
  std::vector<LaunchInfo> table = launchTable(p);
  // Time: launches in order; a line between launches k-1 and k sits at k.
  std::vector<double> at(p.lines.size() + 1, 0);
  size_t k = 0;
  for (size_t li = 0; li < p.lines.size(); ++li) {
    while (k < table.size() && table[k].line < li) ++k;
    at[li] = double(k);
  }
  at[p.lines.size()] = double(table.size());
  double launches = std::max<double>(1, double(table.size()));
  constexpr double kLeft = 90, kTop = 70, kPlotW = 860, kPlotH = 460, kRight = 30;
  double arena = std::max<double>(1, double(r.arenaBytes));
  auto xOf = [&](double t) { return kLeft + kPlotW * t / launches; };
  auto yOf = [&](double off) { return kTop + kPlotH * off / arena; };
  std::ostringstream body;
  size_t planned = 0, runtime = 0;
  for (const MemoryReport::Row &row : r.rows) (row.offset >= 0 ? planned : runtime)++;
  body << " <text class=\"title\" x=\"16\" y=\"24\">" << esc(title)
       << ": the arena over time</text>\n"
       << " <text class=\"note\" x=\"16\" y=\"46\">"
       << esc("arena " + bytesText(r.arenaBytes) + ", lower bound " + bytesText(r.lowerBound) +
              " (ratio " + num(r.ratio) + "); " + std::to_string(planned) + " planned buffers, " +
              std::to_string(runtime) + " allocated at run time")
       << "</text>\n"
       << " <text class=\"note\" x=\"" << num(kLeft + kPlotW) << "\" y=\"" << num(kTop - 8)
       << "\" text-anchor=\"end\">x: launches in execution order, y: arena offset</text>\n";
  // Axes and ticks.
  body << " <rect x=\"" << num(kLeft) << "\" y=\"" << num(kTop) << "\" width=\"" << num(kPlotW)
       << "\" height=\"" << num(kPlotH) << "\" fill=\"#f9fafb\" class=\"axis\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double off = arena * i / 4;
    body << " <text class=\"note\" x=\"" << num(kLeft - 6) << "\" y=\"" << num(yOf(off) + 4)
         << "\" text-anchor=\"end\">" << esc(bytesText(int64_t(off))) << "</text>\n";
  }
  size_t step = std::max<size_t>(1, (table.size() + 9) / 10);
  for (size_t t = 0; t <= table.size(); t += step)
    body << " <text class=\"note\" x=\"" << num(xOf(double(t))) << "\" y=\""
         << num(kTop + kPlotH + 16) << "\" text-anchor=\"middle\">" << t << "</text>\n";
  // A buffer lives from its first line to its last: a launch line is that launch's slot
  // [k, k + 1); any other line (an allocation, a free) sits between launches.
  std::vector<bool> isLaunch(p.lines.size() + 1, false);
  for (const LaunchInfo &l : table) isLaunch[l.line] = true;
  auto clampLine = [&](int32_t line) {
    return size_t(std::clamp<int32_t>(line, 0, int32_t(p.lines.size())));
  };
  auto startOf = [&](int32_t line) { return at[clampLine(line)]; };
  auto endOf = [&](int32_t line) {
    size_t l = clampLine(line);
    return at[l] + (isLaunch[l] ? 1 : 0);
  };
  double bandTop = kTop + kPlotH + 40, bandY = bandTop + 18;
  if (runtime)
    body << " <text class=\"note\" x=\"16\" y=\"" << num(bandTop + 10)
         << "\">allocated at run time (outside the arena):</text>\n";
  size_t i = 0;
  for (const MemoryReport::Row &row : r.rows) {
    double t0 = startOf(row.first), t1 = std::max(endOf(row.last), t0 + 0.25);
    double x0 = xOf(t0), x1 = xOf(t1);
    double y0, h;
    if (row.offset >= 0) {
      y0 = yOf(double(row.offset));
      h = std::max(1.0, kPlotH * double(row.bytes) / arena);
    } else {
      y0 = bandY;
      h = 10;
      bandY += 13;
    }
    char color[40];
    std::snprintf(color, sizeof color, "hsl(%d, 65%%, 68%%)", int((i * 47) % 360));
    std::string tip =
        row.name + ": " + bytesText(row.bytes) +
        (row.offset >= 0 ? " at offset " + std::to_string(row.offset) : " allocated at run time") +
        ", lines " + std::to_string(row.first) + "-" + std::to_string(row.last);
    body << " <g><title>" << esc(tip) << "</title><rect class=\"buffer\" data-name=\""
         << esc(row.name) << "\" data-bytes=\"" << row.bytes << "\" data-offset=\"" << row.offset
         << "\" data-first=\"" << row.first << "\" data-last=\"" << row.last << "\" x=\"" << num(x0)
         << "\" y=\"" << num(y0) << "\" width=\"" << num(std::max(1.0, x1 - x0)) << "\" height=\""
         << num(h) << "\" fill=\"" << color << "\"/>";
    std::string label = clip(row.name, size_t(std::max(0.0, (x1 - x0 - 6) / 7.2)));
    if (h >= 13 && x1 - x0 > 40 && label.size() >= 4)
      body << "<text x=\"" << num(x0 + 3) << "\" y=\"" << num(y0 + std::min(h, 26.0) / 2 + 4)
           << "\">" << esc(label) << "</text>";
    body << "</g>\n";
    ++i;
  }
  return svgDocument(kLeft + kPlotW + kRight, std::max(bandY, kTop + kPlotH + 30) + 16, body.str());
}

} // namespace coil::cli
