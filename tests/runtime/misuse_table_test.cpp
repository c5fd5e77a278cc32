// The misuse table: engine and step lifetimes, nesting, threads, escaping exceptions, abort and
// synchronize, in every Mode. Each (case, mode) runs in its own child process (this binary
// re-executed, with glibc's malloc perturbing freed memory so a use-after-free reads garbage and shows) under a
// timeout, so a crash or a hang is counted. A case either gives eager's values, or (where the table
// allows it) raises a clear error: a std::exception whose message starts with "[".
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <terra/terra.h>

#include "runtime/child_process.h"

namespace terra::testing {
namespace {

using Obs = std::vector<std::vector<double>>;
constexpr const char* kEnv = "TERRA_MISUSE_CHILD";
constexpr double kTimeoutS = 10.0;
// Freed memory is overwritten (0xa5) and never cached per thread, so a use-after-free reads garbage.
constexpr const char* kMallocTunables = "glibc.malloc.perturb=165:glibc.malloc.tcache_count=0";
const std::vector<double> kClearError{-7.25e300};  // "a clear error was raised here" (allowed)

struct Problem : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& s) { throw Problem(s); }
bool clear(const std::exception& e) { return e.what()[0] == '['; }
std::string what(const std::exception& e) { return e.what(); }

// Runs f; a clear std::exception is recorded as kClearError, anything else is a Problem.
void value_or_clear_error(Obs& obs, const std::string& ctx, const std::function<std::vector<double>()>& f) {
  try {
    obs.push_back(f());
  } catch (const Problem&) {
    throw;
  } catch (const std::exception& e) {
    if (!clear(e)) fail(ctx + ": unclear exception: " + what(e));
    obs.push_back(kClearError);
  }
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
void expect_values(const std::string& ctx, const std::vector<double>& got, const std::vector<double>& want) {
  if (got == kClearError) return;
  if (got != want) fail(ctx + ": wrong values");
}

// The small model every case trains.
struct Net {
  nn::Linear lin{4, 3};
  optim::SGD opt{lin.parameters(), 0.1, 0.9};
  Tensor forward_loss() {
    std::vector<float> xv(20), yv(15);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i % 7) - 3) * 0.3f;
    for (size_t i = 0; i < yv.size(); ++i) yv[i] = float(int(i % 5) - 2) * 0.2f;
    return mse_loss(lin(tensor(xv, {5, 4})), tensor(yv, {5, 3}));
  }
  void train() {
    opt.zero_grad();
    forward_loss().backward();
    opt.step();
  }
  std::vector<double> params() {
    std::vector<double> out;
    for (const Tensor& p : lin.parameters())
      for (double v : p.to_vector<double>()) out.push_back(v);
    return out;
  }
};

struct MisuseCase {
  std::string name;
  std::function<Obs(Mode)> run;  // observations compared with the same run in eager
};

std::vector<MisuseCase> misuse_cases() {
  std::vector<MisuseCase> c;
  c.push_back({"engine_destroyed_while_step_alive", [](Mode m) {
    Obs obs;
    auto e = std::make_unique<Engine>(m);
    std::optional<Step> s;
    s.emplace(e->step());
    Tensor t = ones({2}) * 2.0;
    e.reset();  // ~Engine cannot throw: the step must survive it or report at its own end
    try {
      s.reset();
    } catch (const std::exception& ex) {
      if (!clear(ex)) fail("~Step after ~Engine: unclear exception: " + what(ex));
    }
    value_or_clear_error(obs, "placeholder of the dead engine", [&] { return values(t); });
    expect_values("placeholder of the dead engine", obs.back(), {2, 2});
    obs.push_back(values(ones({2}) * 3.0));  // eager ops still work
    return obs;
  }});
  c.push_back({"step_ended_after_engine_destroyed_by_end", [](Mode m) {
    Obs obs;
    auto e = std::make_unique<Engine>(m);
    Step s = e->step();
    Tensor t = ones({3}) + 1.0;
    e.reset();
    try {
      s.end();
    } catch (const std::exception& ex) {
      if (!clear(ex)) fail("Step::end after ~Engine: unclear exception: " + what(ex));
    }
    value_or_clear_error(obs, "placeholder", [&] { return values(t); });
    expect_values("placeholder", obs.back(), {2, 2, 2});
    obs.push_back(values(ones({2}) * 3.0));
    return obs;
  }});
  c.push_back({"placeholder_read_after_engine_died", [](Mode m) {
    Obs obs;
    Tensor loss, w;
    {
      manual_seed(3);
      Engine e(m);
      Net n;
      for (int k = 0; k < 4; ++k) {
        Step s = e.step();
        n.train();
        loss = n.forward_loss();
        w = n.lin.parameters()[0] * 1.0;
      }
    }
    value_or_clear_error(obs, "loss after the engine died", [&] { return values(loss); });
    value_or_clear_error(obs, "weights after the engine died", [&] { return values(w); });
    return obs;
  }});
  c.push_back({"step_moved", [](Mode m) {
    manual_seed(3);
    Engine e(m);
    Net n;
    Obs obs;
    for (int k = 0; k < 6; ++k) {
      Step a = e.step();
      Step b(std::move(a));
      n.train();
      obs.push_back(values(n.forward_loss()));
      if (k % 2) {
        std::optional<Step> c2;
        c2.emplace(std::move(b));
      } else {
        b.end();
      }
    }
    obs.push_back(n.params());
    return obs;
  }});
  c.push_back({"engines_recreated_while_tensors_held", [](Mode m) {
    Obs obs;
    std::vector<Tensor> held;
    for (int i = 0; i < 6; ++i) {
      Engine e(m);
      if (i > 0) value_or_clear_error(obs, "tensor of the previous engine", [&] { return values(held.back()); });
      if (i > 0) expect_values("tensor of the previous engine", obs.back(), {double(i), double(i)});
      Step s = e.step();
      held.push_back(ones({2}) * double(i + 1));
    }
    for (size_t i = 0; i < held.size(); ++i) {
      value_or_clear_error(obs, "held tensor", [&] { return values(held[i]); });
      expect_values("held tensor", obs.back(), {double(i + 1), double(i + 1)});
    }
    return obs;
  }});
  c.push_back({"four_engines_in_a_row_eager_ops_between", [](Mode m) {
    Obs obs;
    for (int i = 0; i < 4; ++i) {
      Engine e(m);
      obs.push_back(values(ones({2}) * 2.0));
    }
    return obs;
  }});
  // `e = make_unique<Engine>(m)` builds the next engine before the last one dies (as Python's
  // `e = terra.Engine(...)` in a loop does): lifetimes overlap, not nested.
  c.push_back({"four_engines_replaced_in_a_row", [](Mode m) {
    Obs obs;
    std::unique_ptr<Engine> e;
    for (int i = 0; i < 4; ++i) {
      e = std::make_unique<Engine>(m);
      obs.push_back(values(ones({2}) * 2.0));
    }
    e.reset();
    obs.push_back(values(ones({2}) * 3.0));
    return obs;
  }});
  c.push_back({"engines_destroyed_in_creation_order", [](Mode m) {
    Obs obs;
    manual_seed(3);
    Net n;
    auto a = std::make_unique<Engine>(m);
    auto b = std::make_unique<Engine>(m);
    for (Engine* e : {a.get(), b.get()}) {
      Step s = e->step();
      n.train();
    }
    a.reset();
    obs.push_back(values(ones({2}) * 2.0));
    {
      Step s = b->step();
      n.train();
    }
    b.reset();
    obs.push_back(values(ones({2}) * 3.0));
    obs.push_back(n.params());
    return obs;
  }});
  c.push_back({"four_engines_in_a_row_with_steps", [](Mode m) {
    Obs obs;
    manual_seed(3);
    Net n;
    for (int i = 0; i < 4; ++i) {
      Engine e(m);
      for (int k = 0; k < 4; ++k) {
        Step s = e.step();
        n.train();
      }
      obs.push_back(values(ones({2}) * 2.0));
      obs.push_back(n.params());
    }
    return obs;
  }});
  c.push_back({"nested_step_of_one_engine", [](Mode m) {
    manual_seed(3);
    Engine e(m);
    Net n;
    for (int k = 0; k < 6; ++k) {
      Step s = e.step();
      if (k == 3) {
        try {
          Step inner = e.step();
          fail("a nested step was accepted");
        } catch (const std::invalid_argument& ex) {
          if (what(ex).rfind("[Engine]", 0) != 0) fail("nested step: message lacks [Engine]: " + what(ex));
        }
      }
      n.train();
    }
    return Obs{n.params()};
  }});
  c.push_back({"steps_of_two_engines_alternating", [](Mode m) {
    manual_seed(3);
    Engine a(m), b(m);
    Net na, nb;
    for (int k = 0; k < 6; ++k) {
      {
        Step s = a.step();
        na.train();
      }
      Step s = b.step();
      nb.train();
    }
    return Obs{na.params(), nb.params()};
  }});
  c.push_back({"steps_of_two_engines_overlapping", [](Mode m) {
    manual_seed(3);
    Obs obs;
    Engine a(m), b(m);
    Net na, nb;
    try {
      for (int k = 0; k < 6; ++k) {
        std::optional<Step> sa, sb;
        sa.emplace(a.step());
        na.train();
        sb.emplace(b.step());
        nb.train();
        sa.reset();
        sb.reset();
      }
      obs = {na.params(), nb.params()};
    } catch (const Problem&) {
      throw;
    } catch (const std::exception& ex) {
      if (!clear(ex)) fail("overlapping steps: unclear exception: " + what(ex));
      obs = {kClearError};
      for (Engine* e : {&a, &b}) {  // both engines stay usable
        Step s = e->step();
        expect_values("after the error", values(ones({2}) * 2.0), {2, 2});
      }
    }
    return obs;
  }});
  c.push_back({"step_begun_on_another_thread", [](Mode m) {
    manual_seed(3);
    Engine e(m);
    Net n;
    std::string err = "no exception";
    std::thread([&] {
      try {
        Step s = e.step();
      } catch (const std::exception& ex) {
        err = clear(ex) ? "" : "unclear exception: " + what(ex);
      }
    }).join();
    if (!err.empty()) fail("Engine::step from another thread: " + err);
    for (int k = 0; k < 4; ++k) {
      Step s = e.step();
      n.train();
    }
    return Obs{n.params()};
  }});
  c.push_back({"step_used_from_another_thread", [](Mode m) {
    manual_seed(3);
    Engine e(m);
    Net n;
    Obs obs;
    for (int k = 0; k < 5; ++k) {
      Step s = e.step();
      n.train();
      if (k == 3) {
        std::string err;
        std::vector<double> got;
        std::thread([&] {
          try {
            got = values(ones({2}) * 5.0);  // ops from another thread while the step is active
            if (got != std::vector<double>{5, 5}) err = "ops on another thread: wrong values";
            s.end();  // the step ended from another thread
          } catch (const std::exception& ex) {
            if (!clear(ex)) err = "unclear exception: " + what(ex);
          }
        }).join();
        if (!err.empty()) fail(err);
      }
    }
    obs.push_back(n.params());
    return obs;
  }});
  for (bool after_update : {false, true}) {
    c.push_back({after_update ? "exception_escapes_step_after_update" : "exception_escapes_step_before_update",
                 [after_update](Mode m) {
      manual_seed(3);
      Engine e(m);
      Net n;
      Obs obs;
      for (int k = 0; k < 6; ++k) {
        try {
          Step s = e.step();
          n.opt.zero_grad();
          Tensor loss = n.forward_loss();
          loss.backward();
          if (k == 3 && !after_update) throw std::runtime_error("user error");
          n.opt.step();
          if (k == 3 && after_update) throw std::runtime_error("user error");
          obs.push_back(values(loss));
        } catch (const std::runtime_error& ex) {
          if (what(ex) != "user error") throw;
        }
      }
      obs.push_back(n.params());
      return obs;
    }});
  }
  c.push_back({"step_abort", [](Mode m) {
    manual_seed(3);
    Engine e(m);
    Net n;
    for (int k = 0; k < 7; ++k) {
      Step s = e.step();
      if (k == 2) s.abort();  // at once: what follows runs outside any step
      n.train();
      if (k == 4) {
        s.abort();
        s.abort();
        s.end();
      }
    }
    return Obs{n.params()};
  }});
  for (bool inside : {false, true}) {
    c.push_back({inside ? "synchronize_inside_a_step" : "synchronize_between_steps", [inside](Mode m) {
      manual_seed(3);
      Engine e(m);
      Net n;
      e.synchronize();
      for (int k = 0; k < 6; ++k) {
        {
          Step s = e.step();
          n.opt.zero_grad();
          Tensor loss = n.forward_loss();
          if (inside && k >= 2) {
            try {
              e.synchronize();
            } catch (const std::exception& ex) {
              if (!clear(ex)) fail("synchronize inside a step: unclear exception: " + what(ex));
            }
          }
          loss.backward();
          n.opt.step();
        }
        if (!inside) {
          e.synchronize();
          e.synchronize();
        }
      }
      return Obs{n.params()};
    }});
  }
  return c;
}

// The child: TERRA_MISUSE_CHILD="<case index>:<mode>" runs that case in eager and in the mode.
TEST(MisuseChild, RunFromEnv) {
  const char* spec = std::getenv(kEnv);
  if (!spec) GTEST_SKIP() << "runs only as the child of MisuseTable.EveryCaseEveryMode";
  std::string s = spec;
  size_t colon = s.find(':');
  MisuseCase c = misuse_cases()[std::stoul(s.substr(0, colon))];
  Mode mode = parse_mode(s.substr(colon + 1));
  auto line = [](const char* kind, const std::string& detail) {
    std::string d = detail;
    for (char& ch : d)
      if (ch == '\n' || ch == '\t') ch = ' ';
    std::printf("@@M\t%s\t%s\n", kind, d.c_str());
    std::fflush(stdout);
  };
  try {
    Obs eager = c.run(Mode::Eager);
    Obs got = mode == Mode::Eager ? eager : c.run(mode);
    bool errored = false, same = got.size() == eager.size();
    for (size_t i = 0; same && i < got.size(); ++i) {
      if (got[i] == kClearError) errored = true;
      else same = got[i] == eager[i];
    }
    if (!same) line("state", "observations differ from eager's");
    else line("ok", errored ? "clear error" : "same values");
  } catch (const Problem& p) {
    line("wrong", p.what());
  } catch (const std::exception& e) {
    line("wrong", std::string("exception escaped the case: ") + e.what());
  }
}

TEST(MisuseTable, EveryCaseEveryMode) {
  const auto cases = misuse_cases();
  const char* modes[] = {"eager", "lazy", "coexec"};
  std::vector<std::string> result[3];  // "ok ..." / "crash ..." / "hang" / "state ..." / "wrong ..."
  {
    std::vector<std::thread> ts;
    for (int m = 0; m < 3; ++m)
      ts.emplace_back([&, m] {
        for (size_t i = 0; i < cases.size(); ++i) {
          ChildProcess child("MisuseChild.RunFromEnv",
                             {{kEnv, std::to_string(i) + ":" + modes[m]}, {"GLIBC_TUNABLES", kMallocTunables}});
          std::string r;
          while (auto l = child.read_line(kTimeoutS))
            if (l->rfind("@@M\t", 0) == 0) r = l->substr(4);
          if (child.timed_out()) {
            child.kill();
            r = "hang\tno result within " + std::to_string(int(kTimeoutS)) + " s";
          } else {
            std::string how = child.wait();
            std::string tail = child.tail().size() > 600 ? child.tail().substr(child.tail().size() - 600) : child.tail();
            for (char& ch : tail)
              if (ch == '\n') ch = ' ';
            if (!exited_ok(how) || r.empty()) r = "crash\t" + how + "; output tail: " + tail;
          }
          result[m].push_back(r);
        }
      });
    for (auto& t : ts) t.join();
  }
  int64_t total = 0, ok = 0, crashes = 0, hangs = 0, state = 0, wrong = 0;
  for (size_t i = 0; i < cases.size(); ++i)
    for (int m = 0; m < 3; ++m) {
      const std::string& r = result[m][i];
      ++total;
      std::string kind = r.substr(0, r.find('\t'));
      if (kind == "ok") ++ok;
      else {
        (kind == "crash" ? crashes : kind == "hang" ? hangs : kind == "state" ? state : wrong)++;
        std::printf("  FAIL %s %s: %s\n", modes[m], cases[i].name.c_str(), r.c_str());
      }
    }
  std::printf("[misuse table] %zu cases x 3 modes: %lld runs, %lld clear errors/same values, %lld crashes, %lld hangs, "
              "%lld state mismatches, %lld wrong errors\n",
              cases.size(), (long long)total, (long long)ok, (long long)crashes, (long long)hangs, (long long)state,
              (long long)wrong);
  std::fflush(stdout);
  EXPECT_EQ(crashes, 0);
  EXPECT_EQ(hangs, 0);
  EXPECT_EQ(state, 0);
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace terra::testing
