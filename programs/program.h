// Terra's ten evaluation programs (paper §5.1), ported to terra. Each program is an ordinary
// imperative training loop that runs unchanged under every Mode; terra-bench drives them.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <terra/terra.h>

namespace terra::programs {

struct RunOptions {
  int steps = 20;     // training steps (iterations of the loop, each inside engine.step())
  bool quick = false; // smaller sizes for CI
  uint64_t seed = 0;
  std::function<void(int step, double loss)> on_step;  // progress callback (may be empty)
  // Called once after the model and data are built, right before step 0 (may be empty): tools
  // time each step's latency from it.
  std::function<void()> on_loop_start;
};

struct RunResult {
  double final_loss = 0;          // loss of the last step, fetched by the host
  double first_loss = 0;          // loss of the first step
  std::vector<double> losses;     // per step
};

struct Program {
  std::string name;         // "resnet", "bert_qa", "yolov3", "dcgan", "gpt2", "bert_cls", "dropblock", "sdpoint", "faster_rcnn", "music_transformer"
  std::string feature;      // the feature that makes it hard for other systems, one line
  // Builds the model and data (with manual_seed(opts.seed)), then trains opts.steps steps,
  // each step inside `auto step = engine.step();`.
  std::function<RunResult(Engine& engine, const RunOptions& opts)> run;
};

const std::vector<Program>& all_programs();
void register_program(Program p);
struct ProgramRegistrar {
  explicit ProgramRegistrar(Program p) { register_program(std::move(p)); }
};

}  // namespace terra::programs
