// Re-executes this test binary as a child process (one gtest filter, one environment variable) and
// reads its output line by line under a timeout, so the table tests count a crash or a hang of the
// engine instead of dying with it.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace terra::testing {

class ChildProcess {
 public:
  using Env = std::vector<std::pair<std::string, std::string>>;
  // Runs `<this binary> --gtest_filter=<filter>` with `env` added to the environment; stdout and
  // stderr both arrive through read_line.
  ChildProcess(const std::string& filter, const Env& env);
  ~ChildProcess();  // kills the child if it is still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line (without '\n'); nullopt at end of output or after timeout_s without a line
  // (then timed_out() is true).
  std::optional<std::string> read_line(double timeout_s);
  bool timed_out() const { return timed_out_; }
  // Kills (SIGKILL) and reaps the child.
  void kill();
  // Reaps the child; a description of how it ended ("exit 0", "signal 11 (Segmentation fault)").
  std::string wait();
  // The last output (up to ~2000 characters), for diagnostics.
  const std::string& tail() const { return tail_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buf_, tail_;
  bool timed_out_ = false, reaped_ = false;
  std::string how_;
};

// Whether a `wait()` description means the child ended cleanly.
inline bool exited_ok(const std::string& how) { return how == "exit 0"; }

}  // namespace terra::testing
