// load_file / load_string: run the script in the sandbox, convert the table, validate the result.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "convert.hpp"
#include "phub/config/load.hpp"
#include "sandbox.hpp"

namespace phub::config {

namespace {

Expected<Config, std::string> load_chunk(std::string_view text, const std::string& chunkname,
                                         std::string_view display, const LoadLimits& limits,
                                         detail::Includes* includes = nullptr) {
  auto root = detail::run_script(text, chunkname, display, limits, includes);
  if (!root) return unexpected(std::move(root).error());
  detail::Errors errors;
  Config config = detail::convert(*root, errors);
  if (errors.empty()) detail::validate_into(config, errors);  // cross-field rules only on well-formed fields
  if (!errors.empty()) return unexpected(errors.join(std::string(display) + ": "));
  return config;
}

}  // namespace

Expected<Config, std::string> load_file(const std::string& path, const LoadLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unexpected(path + ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return unexpected(path + ": cannot read the config file");
  // include() resolves against the config's directory (as named: a symlinked config includes from the
  // link's directory), and every included file must resolve below it.
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::canonical(fs::absolute(fs::path(path)).parent_path(), ec);
  fs::path self = ec ? fs::path() : fs::canonical(fs::path(path), ec);
  if (ec) return unexpected(path + ": cannot resolve the config file's path: " + ec.message());
  detail::Includes includes;
  includes.root = dir.string();
  includes.open.push_back({self.string(), dir.string(), path, "@" + path, {}});
  return load_chunk(text.str(), "@" + path, path, limits, &includes);
}

Expected<Config, std::string> load_string(std::string_view text, std::string_view chunkname,
                                          const LoadLimits& limits) {
  return load_chunk(text, std::string("=").append(chunkname), chunkname, limits);
}

}  // namespace phub::config
