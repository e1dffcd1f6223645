// Cross-check of the fused optimizer against real torch.optim 1.13 (SGD, Adam, AdamW), run by /usr/bin/python3.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support.hpp"

#ifndef PHUB_AGG_TORCH_SCRIPT
#error "the build passes the path of torch_optim_ref.py"
#endif

namespace phub::agg::test {
namespace {

namespace fs = std::filesystem;

constexpr size_t kN = 37;  // torch's vector loop plus its scalar tail
constexpr size_t kSteps = 5;
constexpr float kGradScale = 0.25F;
// torch adds with FMA in its vector loop (a + alpha*b rounded once) where we round twice, so results
// differ by a few ulps per step; 1e-6 relative (~8 ulps) with the array's RMS as a floor.
constexpr double kTorchTolerance = 1e-6;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "phub-agg-torch-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_floats(const fs::path& p, const std::vector<float>& v) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

std::vector<float> read_floats(const fs::path& p, size_t n) {
  std::vector<float> v(n);
  std::ifstream in(p, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (static_cast<size_t>(in.gcount()) != n * sizeof(float)) v.clear();
  return v;
}

std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

void expect_close(const float* got, const float* want, size_t n, const std::string& what) {
  double rms = 0;
  for (size_t i = 0; i < n; ++i) rms += double{want[i]} * want[i];
  rms = std::sqrt(rms / static_cast<double>(n));
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(double{got[i]} - want[i]) / (std::fabs(double{want[i]}) + rms);
    ASSERT_LE(err, kTorchTolerance) << what << " i=" << i << " got " << got[i] << " torch " << want[i];
  }
}

std::string job_line(size_t index, const OptimizerParams& p) {
  return std::to_string(index) + " " + std::string(optimizer_kind_name(p.kind)) + " " + num(p.lr) + " " +
         num(p.momentum) + " " + num(p.beta1) + " " + num(p.beta2) + " " + num(p.eps) + " " + num(p.weight_decay) +
         " " + (p.adamw ? "1" : "0") + " " + num(kGradScale) + " " + std::to_string(kSteps) + "\n";
}

struct Job {
  OptimizerConfig cfg;
  std::vector<float> w, m, v;  // after kSteps of our kernels
};

TEST(AggTorch, OptimizersMatchTorchOptim) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 is missing";
  const Kernels& k = kernels_for(best_isa());
  TempDir dir;
  ASSERT_FALSE(dir.path().empty()) << "mkdtemp failed";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<Job> jobs;
  std::ofstream job_file(dir.path() / "jobs");
  for (const OptimizerConfig& cfg : optimizer_configs()) {
    const size_t index = jobs.size();
    Job job{cfg, std::vector<float>(kN), std::vector<float>(kN), std::vector<float>(kN)};
    std::vector<float> grads(kN * kSteps);
    for (float& x : job.w) x = normal(rng);
    for (float& x : grads) x = normal(rng);
    write_floats(dir.path() / ("w0_" + std::to_string(index)), job.w);
    write_floats(dir.path() / ("grads_" + std::to_string(index)), grads);
    job_file << job_line(index, cfg.p);
    for (size_t step = 1; step <= kSteps; ++step) {
      OptimizerParams p = cfg.p;
      p.step = step;
      p.grad_scale = kGradScale;
      k.optimize(p, job.w.data(), job.m.data(), job.v.data(), grads.data() + (step - 1) * kN, kN);
    }
    jobs.push_back(std::move(job));
  }
  job_file.close();
  const std::string cmd = "timeout 120 /usr/bin/python3 " PHUB_AGG_TORCH_SCRIPT " " + dir.path().string();
  const int status = std::system(cmd.c_str());  // NOLINT(cert-env33-c): fixed interpreter and script
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "torch is not importable by /usr/bin/python3";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  for (size_t index = 0; index < jobs.size(); ++index) {
    const Job& job = jobs[index];
    const std::vector<float> out = read_floats(dir.path() / ("out_" + std::to_string(index)), 3 * kN);
    ASSERT_EQ(out.size(), 3 * kN) << "short output for " << job.cfg.name;
    expect_close(job.w.data(), out.data(), kN, job.cfg.name + " w");
    if (job.cfg.p.kind != OptimizerKind::sgd) expect_close(job.m.data(), out.data() + kN, kN, job.cfg.name + " m");
    if (job.cfg.p.kind == OptimizerKind::adam) expect_close(job.v.data(), out.data() + 2 * kN, kN, job.cfg.name + " v");
  }
}

}  // namespace
}  // namespace phub::agg::test
