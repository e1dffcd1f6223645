// Reading and writing matrix files.
#include "matrix_io.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

namespace phub::probe {
namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) {
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\r')) cell.pop_back();
    while (!cell.empty() && cell.front() == ' ') cell.erase(cell.begin());
    out.push_back(cell);
  }
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

Expected<topo::Matrix, std::string> parse_native(std::istringstream& in) {
  std::vector<topo::Host> hosts;
  std::vector<std::pair<std::pair<size_t, size_t>, topo::PairStats>> pairs;
  std::string line;
  for (int lineno = 2; std::getline(in, line); ++lineno) {
    std::istringstream w(line);
    std::string kind;
    if (!(w >> kind)) continue;
    const std::string where = "matrix line " + std::to_string(lineno) + ": ";
    if (kind == "host") {
      size_t idx = 0;
      topo::Host h;
      if (!(w >> idx >> h.name >> h.addr >> h.port) || idx != hosts.size()) return unexpected(where + "bad host record");
      hosts.push_back(h);
    } else if (kind == "pair") {
      size_t i = 0, j = 0;
      int present = 0;
      topo::PairStats p;
      if (!(w >> i >> j >> present >> p.sent >> p.received >> p.min_us >> p.median_us >> p.p90_us >> p.bw_bytes_per_s))
        return unexpected(where + "bad pair record");
      p.present = present != 0;
      pairs.push_back({{i, j}, p});
    } else {
      return unexpected(where + "unknown record \"" + kind + "\"");
    }
  }
  topo::Matrix m(std::move(hosts));
  for (const auto& [ij, p] : pairs) {
    if (ij.first >= m.size() || ij.second >= m.size() || ij.first == ij.second)
      return unexpected(std::string("matrix: pair index out of range"));
    m.set(ij.first, ij.second, p);
  }
  return m;
}

Expected<topo::Matrix, std::string> parse_csv(std::istringstream& in, const std::string& header) {
  const std::vector<std::string> head = split(header, ',');
  std::vector<topo::Host> hosts;
  for (size_t c = 1; c < head.size(); ++c) hosts.push_back({head[c], head[c], 0});
  topo::Matrix m(hosts);
  std::string line;
  for (size_t row = 0; row < hosts.size(); ++row) {
    if (!std::getline(in, line)) return unexpected("csv: expected " + std::to_string(hosts.size()) + " rows");
    const std::vector<std::string> cells = split(line, ',');
    if (cells.size() != head.size() || cells[0] != hosts[row].name)
      return unexpected("csv row " + std::to_string(row + 1) + ": expected \"" + hosts[row].name + "\" and " +
                        std::to_string(hosts.size()) + " values");
    for (size_t col = row + 1; col < hosts.size(); ++col) {
      const std::string& cell = cells[col + 1];
      if (cell.empty() || cell == "nan" || cell == "-") continue;
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      if (end == cell.c_str() || *end != '\0' || !(v > 0.0) || !std::isfinite(v))
        return unexpected("csv row " + std::to_string(row + 1) + ": bad RTT \"" + cell + "\"");
      topo::PairStats p;
      p.present = true;
      p.min_us = p.median_us = p.p90_us = v;
      p.sent = p.received = 1;
      m.set(row, col, p);
    }
  }
  return m;
}

}  // namespace

std::string format_matrix(const topo::Matrix& m) {
  std::string out = "phub-probe-matrix 1\n";
  char buf[256];
  for (size_t i = 0; i < m.size(); ++i) {
    const topo::Host& h = m.hosts()[i];
    out += "host " + std::to_string(i) + " " + h.name + " " + h.addr + " " + std::to_string(h.port) + "\n";
  }
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = i + 1; j < m.size(); ++j) {
      const topo::PairStats& p = m.at(i, j);
      std::snprintf(buf, sizeof buf, "pair %zu %zu %d %u %u %.3f %.3f %.3f %.0f\n", i, j, p.present ? 1 : 0, p.sent,
                    p.received, p.min_us, p.median_us, p.p90_us, p.bw_bytes_per_s);
      out += buf;
    }
  return out;
}

Expected<topo::Matrix, std::string> parse_matrix(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string first;
  while (std::getline(in, first) && (first.empty() || first[0] == '#')) {
  }
  if (first.rfind("phub-probe-matrix 1", 0) == 0) return parse_native(in);
  if (first.rfind("host,", 0) == 0) return parse_csv(in, first);
  return unexpected(std::string("matrix: expected \"phub-probe-matrix 1\" or a CSV header \"host,...\""));
}

}  // namespace phub::probe
