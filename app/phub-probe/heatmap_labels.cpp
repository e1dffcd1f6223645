// The heatmap's words and numbers: shortened host names for the axes, the colour scale's ticks and their text.
#include <glib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

#include "heatmap.hpp"

namespace phub::probe {
namespace {

// `s` as valid UTF-8 (GLib: each invalid byte becomes U+FFFD).
std::string valid_utf8(const std::string& s) {
  const std::unique_ptr<gchar, decltype(&g_free)> v(g_utf8_make_valid(s.data(), static_cast<gssize>(s.size())), g_free);
  return v.get();
}

size_t chars_of(const std::string& s) { return static_cast<size_t>(g_utf8_strlen(s.c_str(), -1)); }

// The characters [from, to) of `s` (valid UTF-8).
std::string slice(const std::string& s, size_t from, size_t to) {
  const std::unique_ptr<gchar, decltype(&g_free)> sub(
      g_utf8_substring(s.c_str(), static_cast<glong>(from), static_cast<glong>(to)), g_free);
  return sub.get();
}

// The longest suffix ".xxx" that every name has, holds a letter and leaves something before it.
size_t common_domain_chars(const std::vector<std::string>& names) {
  if (names.size() < 2) return 0;
  const std::string& first = names.front();
  for (size_t dot = first.find('.'); dot != std::string::npos; dot = first.find('.', dot + 1)) {
    const std::string suffix = first.substr(dot);
    if (dot == 0 || std::none_of(suffix.begin(), suffix.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
      continue;
    const bool shared = std::all_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
    if (shared) return suffix.size();  // the first dot gives the longest suffix
  }
  return 0;
}

}  // namespace

std::vector<std::string> axis_labels(const std::vector<std::string>& names, size_t max_chars) {
  std::vector<std::string> base;
  for (const std::string& n : names) base.push_back(valid_utf8(n));
  const size_t domain = common_domain_chars(base);
  for (std::string& b : base) b.resize(b.size() - domain);
  if (max_chars < 3) max_chars = 3;
  std::vector<std::string> out;
  // The end usually tells hosts apart (node-0017): it gets half the room, then more while labels collide,
  // then less (a longer start) if that did not help.
  std::vector<size_t> tails;
  for (size_t tail = max_chars / 2; tail + 2 <= max_chars; ++tail) tails.push_back(tail);
  for (size_t tail = max_chars / 2 - 1; tail >= 1; --tail) tails.push_back(tail);
  for (size_t tail : tails) {
    out.clear();
    for (const std::string& b : base) {
      const size_t len = chars_of(b);
      out.push_back(len <= max_chars ? b : slice(b, 0, max_chars - 1 - tail) + "~" + slice(b, len - tail, len));
    }
    if (std::set<std::string>(out.begin(), out.end()).size() == out.size()) return out;
  }
  return tails.empty() ? base : out;
}

std::vector<double> scale_ticks(double lo_us, double hi_us, size_t max_ticks) {
  if (!(lo_us > 0) || !std::isfinite(lo_us) || !(hi_us >= lo_us)) return {};
  if (hi_us == lo_us) return {lo_us};
  for (const std::vector<double>& steps : {std::vector<double>{1, 2, 5}, {1, 3}, {1}}) {
    std::vector<double> ticks;
    for (double decade = std::pow(10.0, std::floor(std::log10(lo_us))); decade <= hi_us; decade *= 10)
      for (double m : steps)
        if (const double v = m * decade; v >= lo_us * (1 - 1e-9) && v <= hi_us * (1 + 1e-9)) ticks.push_back(v);
    if (ticks.size() < 2) return {lo_us, hi_us};
    if (ticks.size() <= max_ticks) return ticks;
  }
  // Decades alone are still too many: every k-th of them.
  std::vector<double> decades, out;
  for (double d = std::pow(10.0, std::ceil(std::log10(lo_us))); d <= hi_us * (1 + 1e-9); d *= 10) decades.push_back(d);
  const size_t k = (decades.size() + std::max<size_t>(max_ticks, 1) - 1) / std::max<size_t>(max_ticks, 1);
  for (size_t i = 0; i < decades.size(); i += k) out.push_back(decades[i]);
  return out;
}

std::string format_us(double us) {
  char buf[32];
  if (us >= 10000) std::snprintf(buf, sizeof buf, "%.0fk", us / 1000);
  else if (us >= 10 || us == std::round(us)) std::snprintf(buf, sizeof buf, "%.0f", us);
  else std::snprintf(buf, sizeof buf, "%.1f", us);
  return buf;
}

}  // namespace phub::probe
