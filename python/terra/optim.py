"""terra.optim: SGD and Adam (the C++ optimizers of libterra)."""
