// Demo: trains an MLP (784-256-256-10 by default) with SGD + momentum on generated classification
// data and prints one line per epoch: epoch, mean loss, train accuracy, steps/s.
//
//   train_mlp [--mode eager|coexec|lazy] [--epochs N] [--batch N] [--hidden N] [--steps-per-epoch N]
//             [--lr X] [--seed N]
//
// The training step is one function (train_step) and the epoch loop another (run_epoch); the
// engine wraps each step, so switching --mode changes nothing else in the program.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <terra/terra.h>

using namespace terra;

namespace {

struct Options {
  int64_t epochs = 5;
  int64_t batch = 64;
  int64_t hidden = 256;
  int64_t steps_per_epoch = 100;
  int64_t in_features = 784;
  int64_t classes = 10;
  double lr = 0.01;
  uint64_t seed = 0;
  Mode mode = Mode::Eager;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_mlp: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--mode")) o.mode = parse_mode(next("--mode"));
    else if (!std::strcmp(argv[i], "--epochs")) o.epochs = std::atoll(next("--epochs"));
    else if (!std::strcmp(argv[i], "--batch")) o.batch = std::atoll(next("--batch"));
    else if (!std::strcmp(argv[i], "--hidden")) o.hidden = std::atoll(next("--hidden"));
    else if (!std::strcmp(argv[i], "--steps-per-epoch")) o.steps_per_epoch = std::atoll(next("--steps-per-epoch"));
    else if (!std::strcmp(argv[i], "--lr")) o.lr = std::atof(next("--lr"));
    else if (!std::strcmp(argv[i], "--seed")) o.seed = std::strtoull(next("--seed"), nullptr, 10);
    else {
      std::fprintf(stderr, "train_mlp: unknown argument %s\n", argv[i]);
      std::exit(2);
    }
  }
  if (o.epochs <= 0 || o.batch <= 0 || o.hidden <= 0 || o.steps_per_epoch <= 0) {
    std::fprintf(stderr, "train_mlp: sizes must be positive\n");
    std::exit(2);
  }
  return o;
}

// Gaussian clusters: class c's samples are centers[c] + noise. Batches are drawn from a fixed
// training set, so the model sees the same examples every epoch.
struct Dataset {
  Tensor x;  // [n, in]
  Tensor y;  // int64 [n]
  int64_t n;
};

Dataset make_dataset(const Options& o) {
  NoGradGuard ng;
  int64_t n = o.batch * o.steps_per_epoch;
  Tensor centers = randn({o.classes, o.in_features}) * 0.15;
  Tensor y = randint(0, o.classes, {n});
  Tensor x = index_select(centers, 0, y) + randn({n, o.in_features});
  return {x.contiguous(), y, n};
}

class Mlp : public nn::Module {
 public:
  Mlp(int64_t in, int64_t hidden, int64_t out) : fc1(in, hidden), fc2(hidden, hidden), fc3(hidden, out) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  Tensor forward(const Tensor& x) override { return fc3(relu(fc2(relu(fc1(x))))); }
  std::string name() const override { return "Mlp"; }

 private:
  nn::Linear fc1, fc2, fc3;
};

struct StepResult {
  float loss;
  int64_t correct;
};

// One iteration: forward, loss, backward, update; fetches the loss and the number of hits.
StepResult train_step(nn::Module& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  Tensor logits = model(x);
  Tensor loss = nn::functional::cross_entropy(logits, y);
  opt.zero_grad();
  loss.backward();
  opt.step();
  Tensor hits = cast(eq(argmax(logits, 1), y), DType::Int64).sum();
  return {loss.item<float>(), hits.item<int64_t>()};
}

struct EpochStats {
  double loss, accuracy, steps_per_s;
};

EpochStats run_epoch(Engine& engine, nn::Module& model, optim::Optimizer& opt, const Dataset& data,
                     const Options& o) {
  model.train();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < o.steps_per_epoch; ++s) {
    int64_t begin = s * o.batch;
    Tensor x = data.x.slice(0, begin, begin + o.batch);
    Tensor y = data.y.slice(0, begin, begin + o.batch);
    StepResult r;
    {
      auto step = engine.step();  // one iteration = one trace
      r = train_step(model, opt, x, y);
    }
    loss_sum += r.loss;
    correct += r.correct;
    seen += o.batch;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {loss_sum / double(o.steps_per_epoch), double(correct) / double(seen), double(o.steps_per_epoch) / secs};
}

}  // namespace

int main(int argc, char** argv) try {
  Options o = parse(argc, argv);
  manual_seed(o.seed);
  Dataset data = make_dataset(o);
  Mlp model(o.in_features, o.hidden, o.classes);
  optim::SGD opt(model.parameters(), o.lr, /*momentum=*/0.9);
  Engine engine(o.mode);
  std::printf("train_mlp: mode %s, MLP %lld-%lld-%lld-%lld, batch %lld, %lld steps/epoch, SGD lr %g momentum 0.9\n",
              mode_name(o.mode), (long long)o.in_features, (long long)o.hidden, (long long)o.hidden,
              (long long)o.classes, (long long)o.batch, (long long)o.steps_per_epoch, o.lr);
  for (int64_t e = 1; e <= o.epochs; ++e) {
    EpochStats st = run_epoch(engine, model, opt, data, o);
    std::printf("epoch %lld  loss %.4f  accuracy %.3f  steps/s %.1f\n", (long long)e, st.loss, st.accuracy,
                st.steps_per_s);
    std::fflush(stdout);
  }
  Stats s = engine.stats();
  std::printf("engine: steps %lld traces %lld fallbacks %lld graph_generations %lld\n", (long long)s.steps,
              (long long)s.traces, (long long)s.fallbacks, (long long)s.graph_generations);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_mlp: %s\n", e.what());
  return 1;
}
