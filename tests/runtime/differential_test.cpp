// Randomized differential test: generates small imperative programs (op chains, branches on
// fetched values, loops with varying trip counts, object mutation changing attributes, in-place
// updates, random ops) and runs each in eager, lazy and co-execution. Every observed value must be
// bit-identical. The interpreter calls many different program points from the same source line,
// which also stresses location matching: the engine must stay correct whatever the graph shape.
// Shape-varying programs (a new batch size every step, fetched counts that decide slice bounds and
// index_select sizes, reshapes whose attributes carry the batch) exercise symbolic attributes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>

#include "runtime/mode_harness.h"
#include "terra/compile/passes.h"
#include "terra/runtime/graph_runner.h"

using namespace terra;
using namespace terra::testing;

namespace {

struct Instr {
  enum Kind { Unary, Binary, Scale, Branch, Loop, Mutate, InPlace, Fetch, Dropout, MatVec, Slice, Reshape, Gather } kind;
  int op = 0, dst = 0, a = 0, b = 0;
  double value = 0;
  int loop_base = 1, loop_vary = 0;  // trips = base + (step + id) % (vary + 1)
  std::vector<Instr> then_block, else_block;
};

struct ProgramSpec {
  std::vector<Instr> code;
  int steps = 8;
};

constexpr int kRegs = 4;

// `shapes`: may also emit the shape-dependent instructions (Slice, Reshape, Gather).
std::vector<Instr> gen_block(std::mt19937& rng, int depth, int len, bool shapes = false) {
  std::vector<Instr> out;
  std::uniform_int_distribution<int> reg(0, kRegs - 1), pick(0, 99);
  for (int i = 0; i < len; ++i) {
    Instr in;
    int p = pick(rng);
    in.dst = reg(rng);
    in.a = reg(rng);
    in.b = reg(rng);
    if (shapes && p < 24) {
      in.kind = p < 8 ? Instr::Slice : p < 16 ? Instr::Reshape : Instr::Gather;
    } else if (p < 30) {
      in.kind = Instr::Unary;
      in.op = pick(rng) % 5;
    } else if (p < 55) {
      in.kind = Instr::Binary;
      in.op = pick(rng) % 4;
    } else if (p < 62) {
      in.kind = Instr::Scale;
      in.value = 0.25 + (pick(rng) % 7) * 0.125;
    } else if (p < 70 && depth < 2) {
      in.kind = Instr::Branch;
      in.value = (pick(rng) % 5 - 2) * 0.5;
      in.then_block = gen_block(rng, depth + 1, 1 + pick(rng) % 3, shapes);
      in.else_block = gen_block(rng, depth + 1, pick(rng) % 3, shapes);
    } else if (p < 78 && depth < 2) {
      in.kind = Instr::Loop;
      in.loop_base = 1 + pick(rng) % 2;
      in.loop_vary = pick(rng) % 3;
      in.then_block = gen_block(rng, depth + 1, 1 + pick(rng) % 3, shapes);
    } else if (p < 82) {
      in.kind = Instr::Mutate;
      in.value = 0.05 * (1 + pick(rng) % 4);
    } else if (p < 88) {
      in.kind = Instr::InPlace;
    } else if (p < 93) {
      in.kind = Instr::Fetch;
    } else if (p < 96) {
      in.kind = Instr::Dropout;
    } else {
      in.kind = Instr::MatVec;
    }
    out.push_back(std::move(in));
  }
  return out;
}

struct Interp {
  std::vector<Tensor> r;
  Tensor w;           // a variable, trained
  double slope = 0.1; // host object state that ops read as an attribute (mutated by programs)
  int step = 0;
  const std::function<void(const Tensor&)>* obs;

  void run(const std::vector<Instr>& code, int id_base) {
    for (size_t i = 0; i < code.size(); ++i) {
      const Instr& in = code[i];
      int id = id_base * 31 + int(i);
      switch (in.kind) {
        case Instr::Unary:
          switch (in.op) {
            case 0: r[in.dst] = tanh(r[in.a]); break;
            case 1: r[in.dst] = sigmoid(r[in.a]); break;
            case 2: r[in.dst] = relu(r[in.a]) - 0.5; break;
            case 3: r[in.dst] = leaky_relu(r[in.a], slope); break;
            default: r[in.dst] = tanh(exp(r[in.a] * 0.5)); break;
          }
          break;
        case Instr::Binary:
          switch (in.op) {
            case 0: r[in.dst] = tanh(r[in.a] + r[in.b]); break;
            case 1: r[in.dst] = r[in.a] * r[in.b]; break;
            case 2: r[in.dst] = tanh(r[in.a] - r[in.b] * w); break;
            default: r[in.dst] = maximum(r[in.a], r[in.b]); break;
          }
          break;
        case Instr::Scale: r[in.dst] = r[in.a] * in.value; break;
        case Instr::Branch:
          if (r[in.a].sum().item<float>() > in.value)
            run(in.then_block, id + 1);
          else
            run(in.else_block, id + 2);
          break;
        case Instr::Loop: {
          int trips = in.loop_base + (step + id) % (in.loop_vary + 1);
          for (int t = 0; t < trips; ++t) run(in.then_block, id + 3);
          break;
        }
        case Instr::Mutate:
          if (step == 3) slope = in.value;
          break;
        case Instr::InPlace: {
          Tensor t = r[in.dst] * 1.0;
          t.add_(r[in.a] * 0.5);
          r[in.dst] = tanh(t);
          break;
        }
        case Instr::Fetch: (*obs)(r[in.a]); break;
        case Instr::Dropout: r[in.dst] = dropout(r[in.a], 0.25, true); break;
        case Instr::MatVec: r[in.dst] = tanh(matmul(r[in.a].unsqueeze(0), w.unsqueeze(1).expand({3, 3})).squeeze(0)); break;
        case Instr::Slice: {  // a fetched value decides the slice's end
          int64_t n = r[in.a].size(0), k = 1 + int64_t(std::fabs(r[in.a].sum().item<float>()) * 7) % n;
          r[in.dst] = tanh(r[in.a] + r[in.a].slice(0, 0, k).sum({0}, true) * 0.25);
          break;
        }
        case Instr::Reshape: {  // the batch travels in the reshapes' attributes
          int64_t n = r[in.a].size(0);
          r[in.dst] = tanh(r[in.a].reshape({n * 3}) * 0.5).reshape({n, 3});
          break;
        }
        case Instr::Gather: {  // a fetched count decides the index tensor's length
          int64_t n = r[in.a].size(0), k = 1 + int64_t(std::fabs(r[in.b].sum().item<float>()) * 5) % (2 * n);
          std::vector<int64_t> idx;
          for (int64_t j = 0; j < k; ++j) idx.push_back((j * 2 + step) % n);
          r[in.dst] = r[in.a] - index_select(r[in.a], 0, tensor(idx, {k})).mean({0}, true) * 0.5;
          break;
        }
      }
    }
  }
};

// `rows` > 0: registers are [n, 3] with a new n in 1..rows every step (a varying batch).
void run_program(const ProgramSpec& spec, Engine& e, const std::function<void(const Tensor&)>& obs, int rows = 0,
                 uint32_t seed = 0) {
  Interp it;
  it.obs = &obs;
  it.w = full({3}, 0.3);
  it.w.requires_grad_();
  std::mt19937 batch_rng(seed);
  for (int s = 0; s < spec.steps; ++s) {
    auto step = e.step();
    it.step = s;
    Tensor x = tensor({0.1f * float(s % 4), -0.2f, 0.3f + 0.05f * float(s)}, {3});
    if (rows > 0) {
      int64_t n = 1 + int64_t(batch_rng() % uint32_t(rows));
      std::vector<float> v;
      for (int64_t i = 0; i < n * 3; ++i) v.push_back(0.1f * float((i * 7 + s) % 11) - 0.5f);
      x = tensor(v, {n, 3});
    }
    it.r.assign(kRegs, Tensor());
    for (int k = 0; k < kRegs; ++k) it.r[size_t(k)] = tanh(x * (0.5 + 0.25 * k) + it.w);
    it.run(spec.code, 0);
    Tensor loss = (it.r[0] + it.r[1] * 0.5 + it.r[2] * 0.25 + it.r[3] * 0.125).sum();
    loss.backward();
    {
      NoGradGuard g;
      if (it.w.grad().defined()) it.w.sub_(it.w.grad() * 0.05);
      it.w.set_grad({});
    }
    obs(loss);
    obs(it.w);
  }
}

// Runs `prog` in eager, lazy and co-execution; false (counted in `failures`) if a mode threw.
struct ThreeModes {
  Observed eager, lazy, co;
};
bool run_three(const std::function<void(Engine&, const std::function<void(const Tensor&)>&)>& prog, int p,
               const char* what, int& failures, ThreeModes& m) {
  try {
    m.eager = run_in_mode(Mode::Eager, prog, uint64_t(p));
    m.lazy = run_in_mode(Mode::Lazy, prog, uint64_t(p));
    m.co = run_in_mode(Mode::CoExecution, prog, uint64_t(p));
    return true;
  } catch (const std::exception& ex) {
    if (++failures <= 3) ADD_FAILURE() << what << " " << p << " threw: " << ex.what();
    return false;
  }
}

void report_mismatch(const ThreeModes& m, int p, const char* what, int& failures) {
  if (++failures > 3) return;
  ADD_FAILURE() << what << " " << p << " differs between modes";
  expect_same(m.eager, m.lazy, "lazy");
  expect_same(m.eager, m.co, "coexec");
}

}  // namespace

TEST(Differential, RandomProgramsAllModesAgree) {
  int n = 1000, first = 0;
  if (const char* env = std::getenv("TERRA_DIFF_PROGRAMS")) n = std::atoi(env);
  if (const char* env = std::getenv("TERRA_DIFF_FIRST")) first = std::atoi(env);
  int mismatches = 0, coexec_steps = 0, fallbacks = 0;
  int64_t fused_ops = 0;
  for (int p = first; p < first + n; ++p) {
    std::mt19937 rng(uint32_t(1234 + p));
    ProgramSpec spec;
    spec.code = gen_block(rng, 0, 3 + int(rng() % 6));
    auto prog = [&](Engine& e, const std::function<void(const Tensor&)>& obs) { run_program(spec, e, obs); };
    ThreeModes m;
    if (!run_three(prog, p, "program", mismatches, m)) continue;
    const Observed &eager = m.eager, &lazy = m.lazy, &co = m.co;
    coexec_steps += int(co.stats.steps - co.stats.traces);
    fallbacks += int(co.stats.fallbacks);
    fused_ops += co.stats.fused_ops + lazy.stats.fused_ops;
    bool same = eager.values == lazy.values && eager.values == co.values;
    // Each compile pass off alone (every fourth program, to bound the time): still eager's values.
    for (unsigned pass = 0; same && p % 4 == 0 && pass < unsigned(compile::Pass::Count); ++pass) {
      compile::set_pass_enabled(compile::Pass(pass), false);
      Observed lazy_off, co_off;
      try {
        lazy_off = run_in_mode(Mode::Lazy, prog, uint64_t(p));
        co_off = run_in_mode(Mode::CoExecution, prog, uint64_t(p));
      } catch (...) {
        compile::set_pass_enabled(compile::Pass(pass), true);
        throw;
      }
      compile::set_pass_enabled(compile::Pass(pass), true);
      same = eager.values == lazy_off.values && eager.values == co_off.values;
      if (!same) ADD_FAILURE() << "program " << p << " differs with pass " << compile::pass_name(compile::Pass(pass)) << " off";
    }
    if (!same) report_mismatch(m, p, "program", mismatches);
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("[differential] %d programs, %d co-executed steps, %d fallbacks, %d mismatches, %lld ops fused\n", n,
              coexec_steps, fallbacks, mismatches, (long long)fused_ops);
  EXPECT_GT(coexec_steps, n);  // the co-execution phase really ran
  EXPECT_GT(fused_ops, n);     // and so did the compile layer
}

// Shape-varying programs: every step a new batch size, plus the instructions above whose attributes
// (slice bounds, reshape sizes) or index lengths come from fetched values.
TEST(Differential, ShapeVaryingProgramsAllModesAgree) {
  int n = 300, first = 0;
  if (const char* env = std::getenv("TERRA_DIFF_SHAPE_PROGRAMS")) n = std::atoi(env);
  if (const char* env = std::getenv("TERRA_DIFF_SHAPE_FIRST")) first = std::atoi(env);
  int mismatches = 0, coexec_steps = 0, fallbacks = 0, traces = 0, steps = 0;
  for (int p = first; p < first + n; ++p) {
    std::mt19937 rng(uint32_t(777 + p));
    ProgramSpec spec;
    spec.steps = 12;
    spec.code = gen_block(rng, 0, 3 + int(rng() % 6), true);
    auto prog = [&](Engine& e, const std::function<void(const Tensor&)>& obs) {
      run_program(spec, e, obs, 6, uint32_t(p));
    };
    ThreeModes m;
    if (!run_three(prog, p, "shape program", mismatches, m)) continue;
    const Observed &eager = m.eager, &lazy = m.lazy, &co = m.co;
    coexec_steps += int(co.stats.steps - co.stats.traces);
    fallbacks += int(co.stats.fallbacks);
    traces += int(co.stats.traces);
    steps += int(co.stats.steps);
    if (eager.values != lazy.values || eager.values != co.values) report_mismatch(m, p, "shape program", mismatches);
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("[differential, shape-varying] %d programs, %d steps, %d traces, %d co-executed steps, %d fallbacks, "
              "%d mismatches\n", n, steps, traces, coexec_steps, fallbacks, mismatches);
  // A new batch every step no longer means a new trace every step: most steps co-execute.
  EXPECT_GT(coexec_steps, steps / 2);
}

// Side by side forced onto every product (no minimum work, three threads so a core is always
// spare): the random programs' matrix products run on a worker beside whatever follows them, with
// fetches, in-place writes, loops and fallbacks around them. Co-execution must still be eager.
TEST(Differential, SideBySideOnEveryProductAgreesWithEager) {
  int n = 250;
  if (const char* env = std::getenv("TERRA_DIFF_SIDE_PROGRAMS")) n = std::atoi(env);
  const int threads = num_threads();
  set_num_threads(3);
  runtime::set_side_min_work(0);
  int mismatches = 0;
  int64_t side_heavy = 0, side_ops = 0;
  for (int p = 0; p < n; ++p) {
    std::mt19937 rng(uint32_t(4321 + p));
    ProgramSpec spec;
    spec.code = gen_block(rng, 0, 3 + int(rng() % 6));
    auto prog = [&](Engine& e, const std::function<void(const Tensor&)>& obs) { run_program(spec, e, obs); };
    Observed eager, co;
    try {
      eager = run_in_mode(Mode::Eager, prog, uint64_t(p));
      co = run_in_mode(Mode::CoExecution, prog, uint64_t(p));
    } catch (const std::exception& ex) {
      if (++mismatches <= 3) ADD_FAILURE() << "program " << p << " threw: " << ex.what();
      continue;
    }
    side_heavy += co.stats.side_heavy_ops;
    side_ops += co.stats.side_ops;
    if (eager.values != co.values && ++mismatches <= 3) {
      ADD_FAILURE() << "program " << p << " differs with side by side forced";
      expect_same(eager, co, "coexec");
    }
  }
  runtime::set_side_min_work(int64_t(1) << 18);
  set_num_threads(threads);
  EXPECT_EQ(mismatches, 0);
  std::printf("[differential, side by side] %d programs, %lld heavy ops beside %lld ops, %d mismatches\n", n,
              (long long)side_heavy, (long long)side_ops, mismatches);
  EXPECT_GT(side_heavy, n / 4);  // it really ran
  EXPECT_GT(side_ops, n / 4);
}
