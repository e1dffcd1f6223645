// phub's style of CLI11 applications: the help layout, errors that name the argument, value checks.
#include "phub/cli/cli.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace phub::cli {
namespace {

// The help layout: phub's own usage lines first (in place of CLI11's generated one), then the description.
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(std::string synopsis) : synopsis_(std::move(synopsis)) {
    column_width(26);
    label("REQUIRED", "required");
  }
  std::string make_usage(const CLI::App* app, std::string) const override {
    return synopsis_ + (app->get_description().empty() ? "" : "\n" + app->get_description() + "\n");
  }
  std::string make_description(const CLI::App*) const override { return {}; }

 private:
  std::string synopsis_;
};

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string range_text(double lo, double hi, bool open_low) {
  return open_low ? "(" + number_text(lo) + ", " + number_text(hi) + "]" : number_text(lo) + ".." + number_text(hi);
}

void style(CLI::App& app, const std::string& synopsis, const std::string& description, const std::string& footer) {
  app.formatter(std::make_shared<Formatter>(synopsis));
  app.description(description);
  app.footer(footer);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// "unknown option '--x'" or "unexpected argument 'x'" for what no option or positional took.
std::string extras_message(const CLI::App& app) {
  const CLI::App* at = &app;
  for (const CLI::App* sub = at; sub != nullptr;) {
    at = sub;
    const auto chosen = sub->get_subcommands();
    sub = chosen.empty() ? nullptr : chosen.front();
  }
  const std::vector<std::string> rest = at->remaining();
  const std::string first = rest.empty() ? app.remaining().front() : rest.front();
  return (first.size() > 1 && first[0] == '-' ? "unknown option '" : "unexpected argument '") + first + "'";
}

}  // namespace

std::unique_ptr<CLI::App> make_app(const std::string& synopsis, const std::string& description,
                                   const std::string& footer) {
  auto app = std::make_unique<CLI::App>();
  style(*app, synopsis, description, footer);
  return app;
}

CLI::App* subcommand(CLI::App& app, const std::string& name, const std::string& synopsis,
                     const std::string& description, const std::string& footer) {
  CLI::App* sub = app.add_subcommand(name, description);
  style(*sub, synopsis, description, footer);
  return sub;
}

Expected<Parsed, std::string> parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    return Parsed{true, app.help()};
  } catch (const CLI::ExtrasError&) {
    return unexpected(extras_message(app));
  } catch (const CLI::ParseError& e) {
    return unexpected(std::string(e.what()));
  }
  return Parsed{};
}

Split split_at_separator(int argc, char** argv) {
  Split s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!s.separated && a == "--") {
      s.separated = true;
    } else {
      (s.separated ? s.after : s.before).push_back(a);
    }
  }
  return s;
}

CLI::Validator number_in(double lo, double hi, bool open_low) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        const bool in = open_low ? v > lo : v >= lo;
        if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || !in || v > hi) {
          return "'" + text + "' is not a number in " + range_text(lo, hi, open_low);
        }
        return {};
      },
      "", "number_in");
}

CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) return "'" + text + "' is not a non-negative number";
        return {};
      },
      "", "non_negative");
}

CLI::Validator whole_in(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
        if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' || errno != 0 || v < lo || v > hi) {
          return "'" + text + "' is not a whole number in " + std::to_string(lo) + ".." + std::to_string(hi);
        }
        return {};
      },
      "", "whole_in");
}

CLI::Validator one_of(const std::vector<std::string>& words) {
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : "|") + w;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        for (const auto& w : words) {
          if (text == w) return {};
        }
        return "'" + text + "' is not " + list;
      },
      "", "one_of");
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "the value is empty" : ""; },
                        "", "non_empty");
}

}  // namespace phub::cli
