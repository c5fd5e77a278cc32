// Downstream use of an installed terra: fits y = 3x - 1 with a one-unit Linear layer and Adam,
// then prints the learned weight and bias and the final loss.
#include <cmath>
#include <cstdio>

#include <terra/terra.h>

int main() {
  using namespace terra;
  manual_seed(0);
  Tensor x = rand({64, 1}) * 4.0 - 2.0;
  Tensor y = x * 3.0 - 1.0;
  nn::Linear model(1, 1);
  optim::Adam opt(model.parameters(), 0.1);
  float loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    Tensor loss = nn::functional::mse_loss(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item<float>();
  }
  float w = model.weight.item<float>(), b = model.bias.item<float>();
  std::printf("downstream: weight %.4f bias %.4f loss %.6f\n", w, b, loss_value);
  // Non-zero exit if it did not learn, so scripts can rely on the status.
  return (std::fabs(w - 3.f) < 0.05f && std::fabs(b + 1.f) < 0.05f) ? 0 : 1;
}
