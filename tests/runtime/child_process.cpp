#include "runtime/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace terra::testing {

ChildProcess::ChildProcess(const std::string& filter, const Env& env) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) throw std::runtime_error("readlink(/proc/self/exe) failed");
  exe[len] = 0;
  // Everything the child needs is built before fork: only async-signal-safe calls between fork and exec.
  std::string filter_arg = "--gtest_filter=" + filter;
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> argv{exe, filter_arg.data(), nullptr};
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) {
    bool replaced = false;
    for (const auto& [name, value] : env)
      replaced |= std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=';
    if (!replaced) envp.push_back(*e);
  }
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execve(exe, argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  fd_ = fds[0];
}

ChildProcess::~ChildProcess() {
  kill();
  if (fd_ >= 0) close(fd_);
}

std::optional<std::string> ChildProcess::read_line(double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (fd_ < 0) {
      if (buf_.empty()) return std::nullopt;
      std::string line;
      line.swap(buf_);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out_ = true;
      return std::nullopt;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, int(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the deadline check above reports the timeout
    char chunk[4096];
    ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd_);
      fd_ = -1;
      continue;
    }
    buf_.append(chunk, size_t(n));
    tail_.append(chunk, size_t(n));
    if (tail_.size() > 4000) tail_.erase(0, tail_.size() - 2000);
  }
}

void ChildProcess::kill() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
}

std::string ChildProcess::wait() {
  if (reaped_ || pid_ <= 0) return how_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  if (WIFEXITED(status)) how_ = "exit " + std::to_string(WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    how_ = "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  else how_ = "status " + std::to_string(status);
  return how_;
}

}  // namespace terra::testing
