// How much issue #9's MLP (4 linears 256 wide, batch 16, Adam) could gain from running the
// optimizer's update on the second core beside other work: the one way left for a graph to run the
// step's kernels faster than eager does (docs/benchmarks.md, "Denormals"). Measured with eager ops on
// two threads of the program at one kernel thread each, so it is an upper bound no runner overhead
// lowers; every variant computes the same values (each layer's update reads what it would read in
// order). Per-step medians, variants interleaved round by round.
//
//   update_overlap [--steps N] [--rounds R]
//
// Variants: "fwd+bwd" (no update: the step without Adam), "sequential 1t" / "sequential 2t" (the
// step as eager runs it, at 1 and 2 kernel threads), "beside the backward" (each layer's update on a
// second thread as soon as its gradients are final, while the backward goes on with the layers below),
// "beside the next forward" (the whole update on the second thread while the next step's forward
// goes on, each layer waiting only for its own parameters).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <terra/terra.h>

using namespace terra;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The MLP with a hand-written backward (what autograd computes for it), so that a layer's update
// can be placed anywhere after its gradients. One Adam per layer: the update can go layer by layer.
struct Mlp {
  std::vector<Tensor> w, b, xs, ys;
  std::vector<std::unique_ptr<optim::Adam>> opt;
  Mlp() {
    manual_seed(1);
    for (int i = 0; i < 8; ++i) {
      xs.push_back(randn({16, 256}));
      ys.push_back(randint(0, 10, {16}));
    }
    manual_seed(0);
    for (int l = 0; l < 4; ++l) {
      nn::Linear fc(256, l == 3 ? 10 : 256);
      w.push_back(fc.weight);
      b.push_back(fc.bias);
      opt.push_back(std::make_unique<optim::Adam>(std::vector<Tensor>{fc.weight, fc.bias}, 1e-3));
    }
  }
  // `before_layer(l)` runs before the forward reads layer l; `grads_final(l)` once layer l's
  // gradients are set and nothing later in the step reads its weight.
  template <class Before, class Final>
  void step(int it, Before before_layer, Final grads_final) {
    NoGradGuard ng;
    std::vector<Tensor> act{xs[size_t(it % 8)]};
    for (int l = 0; l < 4; ++l) {
      before_layer(l);
      Tensor z = linear(act.back(), w[size_t(l)], b[size_t(l)]);
      act.push_back(l < 3 ? relu(z) : z);
    }
    Tensor logits = act.back().detach().requires_grad_();
    set_grad_enabled(true);
    nn::functional::cross_entropy(logits, ys[size_t(it % 8)]).backward();
    set_grad_enabled(false);
    Tensor g = logits.grad();
    for (int l = 3; l >= 0; --l) {
      w[size_t(l)].set_grad(matmul(g.t(), act[size_t(l)]));
      b[size_t(l)].set_grad(sum(g, {0}));
      Tensor gx = l > 0 ? matmul(g, w[size_t(l)]) : Tensor();
      grads_final(l);
      if (l > 0) g = gx * gt(act[size_t(l)], 0.0);
    }
  }
};

// Updates handed to a second thread one layer at a time; `done` counts the layers updated so far.
struct Updater {
  Mlp& m;
  std::atomic<int> posted{0}, done{0};
  std::atomic<bool> stop{false};
  std::thread t;
  // order(k): the layer of the k-th update posted.
  explicit Updater(Mlp& mlp, int (*order)(int)) : m(mlp) {
    t = std::thread([this, order] {
      for (int k = 0;; ++k) {
        while (posted.load(std::memory_order_acquire) <= k)
          if (stop.load()) return;
          else std::this_thread::yield();
        m.opt[size_t(order(k))]->step();
        done.store(k + 1, std::memory_order_release);
      }
    });
  }
  void wait_done(int n) {
    while (done.load(std::memory_order_acquire) < n) std::this_thread::yield();
  }
  ~Updater() {
    stop = true;
    t.join();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int steps = 1000, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: update_overlap [--steps N] [--rounds R]\n");
      return 2;
    }
  }
  const char* names[] = {"fwd+bwd (no update)", "sequential 1t", "sequential 2t", "beside the backward",
                         "beside the next forward"};
  std::vector<std::vector<double>> med(5);
  auto none = [](int) {};
  for (int r = 0; r < rounds; ++r) {
    for (int v = 0; v < 5; ++v) {
      set_num_threads(v == 2 ? 2 : 1);
      Mlp m;
      std::vector<double> per_step;
      if (v <= 2) {
        for (int it = 0; it < steps; ++it) {
          const auto t0 = Clock::now();
          m.step(it, none, none);
          if (v > 0)
            for (auto& o : m.opt) o->step();
          per_step.push_back(us_since(t0));
        }
      } else if (v == 3) {  // layer l's update once its gradients are final: layers 3, 2, 1, 0
        Updater u(m, [](int k) { return 3 - k % 4; });
        for (int it = 0; it < steps; ++it) {
          const auto t0 = Clock::now();
          u.wait_done(4 * it);  // the forward reads every weight
          m.step(it, none, [&](int) { u.posted.fetch_add(1, std::memory_order_release); });
          per_step.push_back(us_since(t0));
        }
        u.wait_done(4 * steps);
      } else {  // the whole update after the backward, layers 0..3; the next forward waits per layer
        Updater u(m, [](int k) { return k % 4; });
        for (int it = 0; it < steps; ++it) {
          const auto t0 = Clock::now();
          // The forward waits for each layer's update of the last step, so by the backward (which
          // sets the gradients again) every update has read them.
          m.step(it, [&](int l) { u.wait_done(4 * (it - 1) + l + 1); }, none);
          u.posted.fetch_add(4, std::memory_order_release);
          per_step.push_back(us_since(t0));
        }
        u.wait_done(4 * steps);
      }
      per_step.erase(per_step.begin(), per_step.begin() + std::min<size_t>(per_step.size(), 50));  // warm-up
      med[size_t(v)].push_back(median(per_step));
    }
  }
  std::printf("issue #9's MLP, hand-written backward, %d steps x %d rounds, median us per step (per round)\n", steps,
              rounds);
  for (int v = 0; v < 5; ++v) {
    std::printf("  %-26s %7.1f  (", names[v], median(med[size_t(v)]));
    for (double x : med[size_t(v)]) std::printf(" %.1f", x);
    std::printf(" )\n");
  }
  return 0;
}
